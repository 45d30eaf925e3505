package dev.dynembed.bownet;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.ops.KeyArrays;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/** Training sub-bags: every key of every line once, under its line's class, in full steps. */
class FeaturesTest {
  @Test
  void subBags_holdEachKeyOfEachLineOnce_withTheLinesClass() {
    // 3 lines of 10, 4 and 7 real keys (padded to 10), classes 2, 0, 1
    int[] lengths = {10, 4, 7};
    int[] labels = {2, 0, 1};
    String[] keys = new String[30];
    float[] mask = new float[30];
    for (int e = 0; e < 3; e++) {
      for (int j = 0; j < 10; j++) {
        keys[e * 10 + j] = j < lengths[e] ? "l" + e + "w" + j : "l" + e + "w0";
        mask[e * 10 + j] = j < lengths[e] ? 1f : 0f;
      }
    }
    Map<String, INDArray> bag = Map.of("words", KeyArrays.of(keys, 3, 10),
        "words_mask", Nd4j.create(mask, new long[] {3, 10}, DataType.FLOAT));
    Random r = new Random(7);
    List<Map<String, INDArray>> steps = Features.steps(Features.subBags(bag, labels, 4, r),
        new Labels(List.of("a", "b", "c")), 3, r);
    // bags: line 0 -> 4+4+2, line 1 -> 4, line 2 -> 4+3: 6 bags in steps of 3
    assertEquals(2, steps.size());
    List<String> seen = new ArrayList<>();
    int bags = 0;
    for (Map<String, INDArray> s : steps) {
      List<String> k = KeyArrays.toList(s.get("words"));
      float[][] m = s.get("words_mask").toFloatMatrix();
      float[][] y = s.get("label_onehot").toFloatMatrix();
      int width = m[0].length;
      assertTrue(width <= 4, "a bag holds at most 4 keys");
      for (int e = 0; e < m.length; e++, bags++) {
        int line = -1;
        int real = 0;
        for (int j = 0; j < width; j++) {
          String key = k.get(e * width + j);
          int keyLine = key.charAt(1) - '0';
          assertTrue(line < 0 || line == keyLine, "a bag mixes lines: " + k);
          line = keyLine;
          if (m[e][j] != 0) {
            seen.add(key);
            real++;
          }
        }
        assertTrue(real > 0, "an empty bag");
        assertEquals(1f, y[e][labels[line]], "bag of line " + line + " has its class");
        assertEquals(1.0, s.get("label_onehot").getRow(e).sumNumber().doubleValue(), 0.0);
      }
    }
    assertEquals(6, bags);
    List<String> expected = new ArrayList<>();
    for (int e = 0; e < 3; e++) {
      for (int j = 0; j < lengths[e]; j++) {
        expected.add("l" + e + "w" + j);
      }
    }
    Collections.sort(expected);
    Collections.sort(seen);
    assertEquals(expected, seen);
  }
}
