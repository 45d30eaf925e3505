package dev.dynembed.ops;

import dev.dynembed.table.client.EmbeddingTable;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.factory.Nd4j;

/** The namespace that creates the ops, in the style of SameDiff's {@code SDNN}. */
public final class DynEmbed {
  private final SameDiff sd;

  public DynEmbed(SameDiff sd) {
    JavaOps.install();
    this.sd = sd;
  }

  /** The trainable scalar whose gradient path carries a table's backward pass. */
  public static String handleName(EmbeddingTable table) {
    return "dynembed_handle_" + table.name();
  }

  /**
   * Rows of string keys from a table, FLOAT.
   *
   * @param keys UTF8 [n] or [b, s]
   * @param training true: missing keys get rows, the backward pass sends gradients to the table;
   *     false: unknown keys read as zero rows and nothing is created or sent
   * @return FLOAT [n, dim] or [b, s, dim]
   */
  public SDVariable dynamicEmbeddingLookup(String name, SDVariable keys, EmbeddingTable table,
      boolean training) {
    return dynamicEmbeddingLookup(name, keys, table, training, DataType.FLOAT);
  }

  /** As above, with the output in {@code dataType} (FLOAT or DOUBLE; DOUBLE for gradient checks). */
  public SDVariable dynamicEmbeddingLookup(String name, SDVariable keys, EmbeddingTable table,
      boolean training, DataType dataType) {
    if (keys.dataType() != DataType.UTF8) {
      throw new IllegalArgumentException("dynamicEmbeddingLookup: keys must be UTF8 but '"
          + keys.name() + "' is " + keys.dataType());
    }
    if (dataType != DataType.FLOAT && dataType != DataType.DOUBLE) {
      throw new IllegalArgumentException(
          "dynamicEmbeddingLookup: dataType must be FLOAT or DOUBLE but was " + dataType);
    }
    Tables.register(table);
    String handleName = handleName(table);
    SDVariable handle = sd.hasVariable(handleName) ? sd.getVariable(handleName)
        : sd.var(handleName, Nd4j.zeros(dataType));
    SDVariable out = new DynamicEmbeddingLookup(sd, keys, handle, table.name(), table.dim(),
        training).outputVariable();
    return sd.updateVariableNameAndReference(out, name);
  }
}
