package dev.dynembed.ops;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ops.DynamicCustomOp;
import org.nd4j.linalg.api.ops.OpContext;
import org.nd4j.linalg.api.shape.LongShapeDescriptor;

/**
 * An op computed in Java inside a SameDiff graph (ND4J 1.0.0-M2.1, which has no user-defined op
 * type; docs/design/0005-samediff-java-ops.md). The contract every such op keeps, stated once:
 *
 * <ul>
 *   <li><b>Execution.</b> {@link JavaOpSession} calls {@link #exec} instead of the native
 *       executioner (which knows only native op hashes). It reads inputs from {@code
 *       oc.getInputArray(i)} and sets every output on {@code oc}; numeric outputs SameDiff
 *       pre-allocated from {@link #calculateOutputShape} are filled in place where they fit
 *       ({@link NdArrays#output}).
 *   <li><b>Shapes and types.</b> {@link #outputShapes} and {@link #outputTypes} answer before the
 *       op runs; {@link #getNumOutputs} is the length of both.
 *   <li><b>Cloning.</b> Gradient functions are built from a FlatBuffers clone: an op carries only
 *       plain properties ({@link #properties}/{@link #readProperties}: strings, numbers,
 *       booleans), and a prototype of every op is registered by name ({@link JavaOps#install}).
 *       Tables are reached by binding id through the graph ({@link GraphTables}).
 *   <li><b>Backward.</b> {@link #doDiff} of a forward op builds its backward op; a backward op
 *       has no gradient of its own (second derivatives through a table are not defined).
 * </ul>
 */
public abstract class JavaOp extends DynamicCustomOp {
  /** For the prototype registered by name, from which clones are deserialized. */
  protected JavaOp() {}

  protected JavaOp(SameDiff sd, SDVariable... args) {
    super(null, sd, args, false);
  }

  /** Computes the outputs; {@code graph} holds the op's tables and the step in progress. */
  abstract void exec(OpContext oc, GraphTables graph);

  /** The output shapes for the inputs set on {@code oc}. */
  abstract List<LongShapeDescriptor> outputShapes(OpContext oc);

  /** The output types for the input types. */
  abstract List<DataType> outputTypes(List<DataType> inputs);

  /** The op's registered name, on each concrete op class. */
  @java.lang.annotation.Retention(java.lang.annotation.RetentionPolicy.RUNTIME)
  @java.lang.annotation.Target(java.lang.annotation.ElementType.TYPE)
  @interface Name {
    String value();
  }

  private static final ClassValue<String> NAMES = new ClassValue<>() {
    @Override
    protected String computeValue(Class<?> c) {
      Name n = c.getAnnotation(Name.class);
      if (n == null) {
        throw new IllegalStateException(c.getName() + " has no @JavaOp.Name");
      }
      return n.value();
    }
  };

  /** The name the op is registered and serialized under (its class's {@link Name}). */
  @Override
  public final String opName() {
    return NAMES.get(getClass());
  }

  /** Outputs of the op: one unless it says otherwise (as many as {@link #outputTypes} lists). */
  @Override
  public int getNumOutputs() {
    return 1;
  }

  /** The op's properties, in a fixed order (what a FlatBuffers clone carries). */
  abstract void properties(Map<String, Object> out);

  /** Sets the op's properties from a clone's map (values as {@link #properties} wrote them). */
  abstract void readProperties(Props in);

  @Override
  public final List<LongShapeDescriptor> calculateOutputShape(OpContext oc) {
    return outputShapes(oc);
  }

  @Override
  public final List<DataType> calculateOutputDataTypes(List<DataType> inputs) {
    return outputTypes(inputs);
  }

  @Override
  public final Map<String, Object> propertiesForFunction() {
    Map<String, Object> m = new LinkedHashMap<>();
    properties(m);
    return m;
  }

  @Override
  public final void setPropertiesForFunction(Map<String, Object> properties) {
    readProperties(new Props(properties));
  }

  @Override
  public List<SDVariable> doDiff(List<SDVariable> grads) {
    throw new UnsupportedOperationException(opName() + " has no gradient");
  }

  /** Typed reads of a property map (FlatBuffers gives numbers back as Long or Double). */
  static final class Props {
    private final Map<String, Object> m;

    Props(Map<String, Object> m) {
      this.m = m;
    }

    String string(String key) {
      return (String) m.get(key);
    }

    int integer(String key) {
      return ((Number) m.get(key)).intValue();
    }

    /** The value, or {@code otherwise} for a property older graphs do not carry. */
    int integerOr(String key, int otherwise) {
      Object v = m.get(key);
      return v == null ? otherwise : ((Number) v).intValue();
    }

    long longValue(String key) {
      return ((Number) m.get(key)).longValue();
    }

    float floatValue(String key) {
      return ((Number) m.get(key)).floatValue();
    }

    boolean bool(String key) {
      return Boolean.TRUE.equals(m.get(key));
    }
  }
}
