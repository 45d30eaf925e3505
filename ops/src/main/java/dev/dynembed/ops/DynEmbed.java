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

  /**
   * @param keys UTF8 [n] or [b, s]
   * @return FLOAT [n, dim] or [b, s, dim]
   */
  public SDVariable dynamicEmbeddingLookup(String name, SDVariable keys, EmbeddingTable table,
      boolean training) {
    if (keys.dataType() != DataType.UTF8) {
      throw new IllegalArgumentException("dynamicEmbeddingLookup: keys must be UTF8 but '"
          + keys.name() + "' is " + keys.dataType());
    }
    Tables.register(table);
    String handleName = "dynembed_handle_" + table.name();
    SDVariable handle = sd.hasVariable(handleName) ? sd.getVariable(handleName)
        : sd.var(handleName, Nd4j.zeros(DataType.FLOAT));
    SDVariable out = new DynamicEmbeddingLookup(sd, keys, handle, table.name(), table.dim(),
        training).outputVariable();
    return sd.updateVariableNameAndReference(out, name);
  }
}
