package dev.dynembed.ops;

import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.VectorMask;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

/**
 * {@link SigmoidKernels} on the JDK's vector API; loaded only when the vector module is present
 * (through {@code FloatKernels.VECTOR}). The tails run the scalar loops.
 *
 * <p>{@code exp} and {@code log1p} are Cephes' float polynomials ({@link SigmoidKernels#exp} and
 * {@link SigmoidKernels#log1p} lane by lane) in adds, multiplies and bit casts only, not the
 * vector API's {@code EXP} and {@code LOG}: those run the JDK's SVML stubs once C2 has compiled
 * the caller and {@code Math.exp} per lane before, which differ in the last bit for some inputs,
 * so two runs of one seeded training differed by an ulp whenever the JIT reached a kernel at a
 * different step (PipelineTest, 2026-11-28 and -30). IEEE arithmetic gives the same bits in
 * every tier.
 */
final class VectorSigmoid {
  private VectorSigmoid() {}

  private static final VectorSpecies<Float> S = FloatVector.SPECIES_PREFERRED;

  static void lossTerms(float[] x, float[] y, float[] out, int n) {
    int i = 0;
    for (int up = S.loopBound(n); i < up; i += S.length()) {
      FloatVector v = FloatVector.fromArray(S, x, i);
      FloatVector softplus = log1p(exp(v.abs().neg()));
      v.max(0f).sub(v.mul(FloatVector.fromArray(S, y, i))).add(softplus).intoArray(out, i);
    }
    SigmoidKernels.scalarLossTerms(x, y, out, i, n);
  }

  static void sigmoidMinus(float[] x, float[] y, float[] out, int n) {
    FloatVector one = FloatVector.broadcast(S, 1f);
    int i = 0;
    for (int up = S.loopBound(n); i < up; i += S.length()) {
      FloatVector v = FloatVector.fromArray(S, x, i);
      FloatVector t = exp(v.abs().neg());
      one.blend(t, v.lt(0f)).div(t.add(1f)).sub(FloatVector.fromArray(S, y, i))
          .intoArray(out, i);
    }
    SigmoidKernels.scalarSigmoidMinus(x, y, out, i, n);
  }

  /** {@link SigmoidKernels#exp} lane by lane, for x &lt;= 0. */
  static FloatVector exp(FloatVector x) {
    x = x.max(SigmoidKernels.EXP_MIN);
    FloatVector shifted = x.mul(SigmoidKernels.LOG2E).add(SigmoidKernels.ROUNDER);
    FloatVector n = shifted.sub(SigmoidKernels.ROUNDER);
    FloatVector r = n.mul(-SigmoidKernels.LN2_HI).add(x);
    r = n.mul(-SigmoidKernels.LN2_LO).add(r);
    FloatVector z = r.mul(r);
    FloatVector p = r.mul(SigmoidKernels.E5).add(SigmoidKernels.E4).mul(r).add(SigmoidKernels.E3)
        .mul(r).add(SigmoidKernels.E2).mul(r).add(SigmoidKernels.E1).mul(r).add(SigmoidKernels.E0);
    p = p.mul(z).add(r).add(1f);
    FloatVector scale = ((IntVector) shifted.reinterpretAsInts())
        .sub(SigmoidKernels.ROUNDER_BITS_LESS_BIAS)
        .lanewise(VectorOperators.LSHL, 23).reinterpretAsFloats();
    return p.mul(scale);
  }

  /** {@link SigmoidKernels#log1p} lane by lane, for t in [0, 1]. */
  static FloatVector log1p(FloatVector t) {
    VectorMask<Float> big = t.compare(VectorOperators.GT, SigmoidKernels.SQRT2_M1);
    FloatVector m = t.blend(t.sub(1f).mul(0.5f), big);
    FloatVector e = FloatVector.zero(S).blend(1f, big);
    FloatVector z = m.mul(m);
    FloatVector p = m.mul(SigmoidKernels.L8).add(SigmoidKernels.L7).mul(m).add(SigmoidKernels.L6)
        .mul(m).add(SigmoidKernels.L5).mul(m).add(SigmoidKernels.L4).mul(m).add(SigmoidKernels.L3)
        .mul(m).add(SigmoidKernels.L2).mul(m).add(SigmoidKernels.L1).mul(m).add(SigmoidKernels.L0);
    FloatVector y = p.mul(m).mul(z);
    y = e.mul(SigmoidKernels.LN2_LO).add(y);
    y = z.mul(-0.5f).add(y);
    return e.mul(SigmoidKernels.LN2_HI).add(m.add(y));
  }
}
