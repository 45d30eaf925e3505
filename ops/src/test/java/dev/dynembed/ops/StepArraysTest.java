package dev.dynembed.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.nd4j.autodiff.samediff.internal.SessionMemMgr;
import org.nd4j.autodiff.samediff.internal.memory.NoOpMemoryMgr;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.api.shape.LongShapeDescriptor;

class StepArraysTest {
  /** Counts what reaches the session's own manager. */
  private static final class Recording extends NoOpMemoryMgr {
    final List<INDArray> allocated = new ArrayList<>();
    final List<INDArray> released = new ArrayList<>();

    @Override
    public INDArray allocate(boolean detached, DataType dataType, long... shape) {
      INDArray a = super.allocate(detached, dataType, shape);
      allocated.add(a);
      return a;
    }

    @Override
    public void release(INDArray array) {
      released.add(array);
    }
  }

  @AfterEach
  void endAnyStep() {
    StepArrays.end();
  }

  @Test
  void arraysOfAStep_areReusedByTheNextStep_withTheSameTypeAndShape() {
    Recording session = new Recording();
    SessionMemMgr m = StepArrays.memoryManager(session);

    StepArrays.begin();
    INDArray a = m.allocate(false, DataType.FLOAT, 8, 3);
    INDArray b = m.allocate(false, LongShapeDescriptor.fromShape(new long[] {8, 3},
        DataType.FLOAT));
    INDArray c = m.allocate(false, DataType.DOUBLE, 8, 3);
    assertNotSame(a, b);
    assertEquals(3, StepArrays.lent());
    m.release(a); // SameDiff releasing a pooled array must not hand it to its own cache
    assertEquals(0, session.released.size());
    StepArrays.end();
    assertEquals(0, StepArrays.lent());
    assertEquals(3, StepArrays.pooled());

    StepArrays.begin();
    INDArray a2 = m.allocate(false, DataType.FLOAT, 8, 3);
    INDArray b2 = m.allocate(false, DataType.FLOAT, 8, 3);
    INDArray c2 = m.allocate(false, DataType.DOUBLE, 8, 3);
    INDArray other = m.allocate(false, DataType.FLOAT, 3, 8);
    assertSame(a, a2);
    assertSame(b, b2);
    assertSame(c, c2);
    assertNotSame(a, other);
    assertEquals(new ArrayList<>(List.of(3L, 8L)), toList(other.shape()));
    assertEquals(0, session.allocated.size(), "the session's manager was not asked");
    StepArrays.end();
  }

  @Test
  void outsideAStep_theSessionsOwnManagerAllocatesAndReleases() {
    Recording session = new Recording();
    SessionMemMgr m = StepArrays.memoryManager(session);
    INDArray a = m.allocate(false, DataType.FLOAT, 4, 4);
    assertEquals(List.of(a), session.allocated);
    m.release(a);
    assertEquals(List.of(a), session.released);
    assertEquals(0, StepArrays.lent());

    StepArrays.begin(); // scalars, strings and empty arrays are never pooled
    m.allocate(false, DataType.FLOAT);
    m.allocate(false, DataType.UTF8, 2);
    m.allocate(false, DataType.FLOAT, 0, 100); // an empty batch
    assertEquals(4, session.allocated.size());
    assertEquals(0, StepArrays.lent());
  }

  private static List<Long> toList(long[] v) {
    List<Long> l = new ArrayList<>();
    for (long x : v) {
      l.add(x);
    }
    return l;
  }
}
