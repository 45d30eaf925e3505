package dev.dynembed.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/** dynamicEmbeddingLookup's backward agrees with central finite differences in double. */
class GradientCheckTest {
  @Test
  void lookupBackward_matchesCentralDifferences() {
    int dim = 4;
    ProbeTable table = new ProbeTable("probe", dim);
    Random rnd = new Random(11);
    String[] vocab = {"x", "y", "z"};
    for (String k : vocab) {
      float[] r = new float[dim];
      for (int j = 0; j < dim; j++) {
        r[j] = (float) (rnd.nextGaussian() * 0.5);
      }
      table.rows.put(k, r);
    }
    String[][] batch = {{"x", "y", "x"}, {"z", "z", "y"}}; // [2, 3], duplicates

    SameDiff sd = SameDiff.create();
    SDVariable keys = sd.placeHolder("keys", DataType.UTF8, 2, 3);
    SDVariable rows = new DynEmbed(sd).dynamicEmbeddingLookup("rows", keys, table, true,
        DataType.DOUBLE); // [2, 3, 4] double
    SDVariable w = sd.var("w", Nd4j.rand(DataType.DOUBLE, dim, 2).subi(0.5));
    SDVariable h = sd.math().tanh(rows.mean(1).mmul(w)); // [2, 2], non-linear
    SDVariable loss = h.mul(h).sum().add(rows.mul(rows).sum().mul(0.1)).rename("loss");
    sd.setLossVariables(loss);
    Map<String, INDArray> ph = Map.of("keys", Strings.matrix(batch));

    sd.calculateGradients(ph, DynEmbed.handleName(sd, table));
    double eps = 1.0 / 1024; // exact in float for |row| < 2^13: the nudge itself is lossless
    for (String k : vocab) {
      for (int j = 0; j < dim; j++) {
        float[] r = table.rows.get(k);
        float orig = r[j];
        r[j] = (float) (orig + eps);
        double up = sd.output(ph, "loss").get("loss").getDouble(0);
        r[j] = (float) (orig - eps);
        double down = sd.output(ph, "loss").get("loss").getDouble(0);
        r[j] = orig;
        double numeric = (up - down) / (2 * eps);
        double analytic = table.received.get(k)[j];
        assertEquals(numeric, analytic, 1e-4 * Math.max(1, Math.abs(numeric)),
            "dL/d row(" + k + ")[" + j + "]");
      }
    }
  }
}
