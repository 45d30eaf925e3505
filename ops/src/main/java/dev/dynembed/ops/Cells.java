package dev.dynembed.ops;

import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Pattern;
import org.nd4j.linalg.api.ndarray.INDArray;

/** The {@link DynamicCell}s of this process, by name. */
public final class Cells {
  private static final Pattern NAME = Pattern.compile("[A-Za-z0-9_.-]{1,128}");
  private static final ConcurrentHashMap<String, DynamicCell> CELLS = new ConcurrentHashMap<>();
  private static final DynamicCell GRADIENT = new Gradient();

  static {
    CELLS.put(GRADIENT.name(), GRADIENT);
  }

  private Cells() {}

  /**
   * Registers {@code cell} under its name. Registering a cell of the same class again is a no-op;
   * a cell of another class under a taken name is refused (graphs find cells by name).
   *
   * @return the registered cell
   */
  public static DynamicCell register(DynamicCell cell) {
    String n = cell.name();
    if (n == null || !NAME.matcher(n).matches()) {
      throw new IllegalArgumentException("a cell's name must match " + NAME.pattern()
          + " but " + cell.getClass().getName() + " has '" + n + "'");
    }
    DynamicCell before = CELLS.putIfAbsent(n, cell);
    if (before != null && before.getClass() != cell.getClass()) {
      throw new IllegalArgumentException("cell name '" + n + "' is taken by "
          + before.getClass().getName() + "; " + cell.getClass().getName() + " needs another");
    }
    return before != null ? before : cell;
  }

  /** The cell registered under {@code name}. */
  static DynamicCell get(String name) {
    DynamicCell c = CELLS.get(name);
    if (c == null) {
      throw new IllegalStateException("cell '" + name + "' is not registered in this process:"
          + " call Cells.register with it before running (or loading) a graph that uses it");
    }
    return c;
  }

  /**
   * The gradient cell, {@code dynamicEmbeddingLookup}'s: the output is the rows, the feedback is
   * the output's gradient (and the table's optimizer takes it as a gradient).
   */
  public static DynamicCell gradient() {
    return GRADIENT;
  }

  private static final class Gradient implements DynamicCell {
    @Override
    public String name() {
      return "gradient";
    }

    @Override
    public long[] outputShape(long[] rowsShape, List<long[]> inputShapes) {
      return rowsShape;
    }

    @Override
    public INDArray forward(INDArray rows, List<INDArray> inputs) {
      return rows;
    }

    @Override
    public Backward backward(INDArray rows, List<INDArray> inputs, INDArray outputGrad) {
      return new Backward(outputGrad, List.of());
    }
  }
}
