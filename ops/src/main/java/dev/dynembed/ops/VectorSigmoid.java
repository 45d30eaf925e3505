package dev.dynembed.ops;

import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

/**
 * {@link SigmoidKernels} on the JDK's vector API; loaded only when the vector module is present
 * (through {@code FloatKernels.VECTOR}). The tails run the scalar loops.
 */
final class VectorSigmoid {
  private VectorSigmoid() {}

  private static final VectorSpecies<Float> S = FloatVector.SPECIES_PREFERRED;

  static void lossTerms(float[] x, float[] y, float[] out, int n) {
    int i = 0;
    for (int up = S.loopBound(n); i < up; i += S.length()) {
      FloatVector v = FloatVector.fromArray(S, x, i);
      FloatVector softplus = v.abs().neg().lanewise(VectorOperators.EXP).add(1f)
          .lanewise(VectorOperators.LOG);
      v.max(0f).sub(v.mul(FloatVector.fromArray(S, y, i))).add(softplus).intoArray(out, i);
    }
    SigmoidKernels.scalarLossTerms(x, y, out, i, n);
  }

  static void sigmoidMinus(float[] x, float[] y, float[] out, int n) {
    FloatVector one = FloatVector.broadcast(S, 1f);
    int i = 0;
    for (int up = S.loopBound(n); i < up; i += S.length()) {
      FloatVector v = FloatVector.fromArray(S, x, i);
      FloatVector t = v.abs().neg().lanewise(VectorOperators.EXP);
      one.blend(t, v.lt(0f)).div(t.add(1f)).sub(FloatVector.fromArray(S, y, i))
          .intoArray(out, i);
    }
    SigmoidKernels.scalarSigmoidMinus(x, y, out, i, n);
  }
}
