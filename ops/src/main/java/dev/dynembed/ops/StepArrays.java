package dev.dynembed.ops;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import org.nd4j.autodiff.samediff.internal.SessionMemMgr;
import org.nd4j.autodiff.samediff.internal.memory.AbstractMemoryMgr;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.api.shape.LongShapeDescriptor;
import org.nd4j.linalg.factory.Nd4j;

/**
 * Recycles the arrays SameDiff allocates for op outputs from one training step to the next.
 *
 * <p>M2.1's session allocates every op output through its memory manager and, in training
 * ({@code calculateGradientsAndOutputs}), never releases one, so each step allocates fresh native
 * buffers, which the allocator zero-fills and the kernel backs with fresh pages: for word2vec ~7
 * MB per step, and 7% of a training run's CPU profile in memset and page faults.
 *
 * <p>Between {@link #begin()} and {@link #end()} on a thread, the sessions of that thread take
 * numeric arrays from a per-thread pool keyed by type and shape; {@link #end()} returns every
 * array handed out since {@link #begin()} to the pool. The caller of {@link #end()} promises that
 * it holds none of them any more: {@code Trainer.step} reads the fetched values and applies the
 * dense updates first. Recycled arrays are not cleared; like SameDiff's own cache, ops write all
 * of their outputs. Outside begin/end, allocation is the session's default.
 */
public final class StepArrays {
  /** Bytes kept for reuse per thread; arrays beyond it are left to the garbage collector. */
  static final long MAX_POOLED_BYTES = 256L << 20;

  private static final ThreadLocal<Pool> POOL = ThreadLocal.withInitial(Pool::new);

  private StepArrays() {}

  /** Starts a step on this thread: session allocations come from the pool until {@link #end()}. */
  public static void begin() {
    POOL.get().active = true;
  }

  /**
   * Ends the step: every array handed out since {@link #begin()} goes back to the pool. Arrays
   * of the step must not be used after this.
   */
  public static void end() {
    POOL.get().recycle();
  }

  /** Arrays handed out and kept, for tests. */
  static int lent() {
    return POOL.get().lent.size();
  }

  static int pooled() {
    return POOL.get().free.values().stream().mapToInt(ArrayDeque::size).sum();
  }

  /** The memory manager of a session: the pool during a step, else {@code fallback}. */
  static SessionMemMgr memoryManager(SessionMemMgr fallback) {
    return new Manager(fallback);
  }

  private record Key(DataType type, long[] shape) {
    @Override
    public boolean equals(Object o) {
      return o instanceof Key k && k.type == type && Arrays.equals(k.shape, shape);
    }

    @Override
    public int hashCode() {
      return type.hashCode() * 31 + Arrays.hashCode(shape);
    }
  }

  private static final class Pool {
    boolean active;
    final Map<Key, ArrayDeque<INDArray>> free = new HashMap<>();
    final List<INDArray> lent = new ArrayList<>();
    final Map<INDArray, Boolean> owned = new IdentityHashMap<>();
    long pooledBytes;

    INDArray take(DataType type, long[] shape) {
      ArrayDeque<INDArray> q = free.get(new Key(type, shape));
      INDArray a = q == null ? null : q.pollFirst();
      if (a != null) {
        pooledBytes -= bytes(a);
      } else {
        a = Nd4j.createUninitializedDetached(type, shape);
        owned.put(a, Boolean.TRUE);
      }
      lent.add(a);
      return a;
    }

    void recycle() {
      active = false;
      for (INDArray a : lent) {
        long b = bytes(a);
        if (pooledBytes + b > MAX_POOLED_BYTES || a.wasClosed()) {
          owned.remove(a);
          continue;
        }
        free.computeIfAbsent(new Key(a.dataType(), a.shape()), k -> new ArrayDeque<>()).add(a);
        pooledBytes += b;
      }
      lent.clear();
    }

    private static long bytes(INDArray a) {
      return a.length() * a.dataType().width();
    }
  }

  private static final class Manager extends AbstractMemoryMgr {
    private final SessionMemMgr fallback;

    Manager(SessionMemMgr fallback) {
      this.fallback = fallback;
    }

    /** Numeric and boolean arrays with at least one element and one dimension. */
    private static boolean poolable(DataType type, long[] shape) {
      if (!(type.isNumerical() || type == DataType.BOOL) || shape.length == 0) {
        return false;
      }
      for (long n : shape) {
        if (n <= 0) {
          return false;
        }
      }
      return true;
    }

    @Override
    public INDArray allocate(boolean detached, DataType dataType, long... shape) {
      Pool p = POOL.get();
      if (p.active && poolable(dataType, shape)) {
        return p.take(dataType, shape.clone());
      }
      return fallback.allocate(detached, dataType, shape);
    }

    @Override
    public INDArray allocate(boolean detached, LongShapeDescriptor descriptor) {
      if (descriptor.isEmpty() || descriptor.getOrder() != 'c') {
        return fallback.allocate(detached, descriptor);
      }
      return allocate(detached, descriptor.dataType(), descriptor.getShape());
    }

    @Override
    public void release(INDArray array) {
      if (!POOL.get().owned.containsKey(array)) { // the pool's arrays come back at end()
        fallback.release(array);
      }
    }

    @Override
    public void close() {
      fallback.close();
    }
  }
}
