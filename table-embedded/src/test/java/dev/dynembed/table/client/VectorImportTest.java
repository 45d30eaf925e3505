package dev.dynembed.table.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dynembed.table.common.RowOptimizer;
import dev.dynembed.table.common.TableConfigs;
import dev.dynembed.table.common.TableException;
import dev.dynembed.table.v1.TableConfig;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Vectors in ({@link VectorImport}, {@link EmbeddingTable#assign}): every format imports bit for
 * bit, in process and over 2 loopback shards; imported keys get rows whatever the admission,
 * fresh optimizer slots and update counts (an Adam step after the import is the direct
 * computation's), and the frequencies asked for; a file with an error is refused by line and
 * changes nothing.
 */
class VectorImportTest {
  @TempDir Path dir;

  private static final int DIM = 6;

  private static TableConfig adam(String name, int minCount) {
    return TableConfigs.normalize(TableConfigs.builder(name, DIM)
        .setOptimizer(TableConfigs.adam(0.05f, 0.9f, 0.999f, 1e-8f)).setMinCount(minCount)
        .setInitializer(TableConfigs.uniform(-0.5f, 0.5f, 3)).build());
  }

  /** Keys with non-ASCII letters, values of every magnitude a file may hold. */
  private static String[] keys(int n) {
    String[] k = new String[n];
    for (int i = 0; i < n; i++) {
      k[i] = switch (i % 4) {
        case 0 -> "w" + i;
        case 1 -> "naïve" + i;
        case 2 -> "日本" + i;
        default -> "x_" + i + "-y";
      };
    }
    return k;
  }

  private static float[] values(int n, long seed) {
    Random r = new Random(seed);
    float[] v = new float[n * DIM];
    for (int i = 0; i < v.length; i++) {
      v[i] = (float) (r.nextGaussian() * Math.pow(10, r.nextInt(7) - 4));
    }
    return v;
  }

  static void writeText(Path f, String[] keys, float[] v, int dim, boolean header)
      throws IOException {
    StringBuilder b = new StringBuilder();
    if (header) {
      b.append(keys.length).append(' ').append(dim).append('\n');
    }
    for (int i = 0; i < keys.length; i++) {
      b.append(keys[i]);
      for (int j = 0; j < dim; j++) {
        b.append(' ').append(v[i * dim + j]);
      }
      b.append(header ? " \n" : "\n"); // the C tool leaves a space before the newline
    }
    Files.writeString(f, b.toString(), StandardCharsets.UTF_8);
  }

  static void writeBinary(Path f, String[] keys, float[] v, int dim) throws IOException {
    ByteArrayOutputStream o = new ByteArrayOutputStream();
    o.writeBytes((keys.length + " " + dim + "\n").getBytes(StandardCharsets.UTF_8));
    ByteBuffer row = ByteBuffer.allocate(dim * 4).order(ByteOrder.LITTLE_ENDIAN);
    for (int i = 0; i < keys.length; i++) {
      o.writeBytes((keys[i] + " ").getBytes(StandardCharsets.UTF_8));
      row.clear();
      for (int j = 0; j < dim; j++) {
        row.putFloat(v[i * dim + j]);
      }
      o.writeBytes(row.array());
      o.write('\n');
    }
    Files.write(f, o.toByteArray());
  }

  private static void close(List<AutoCloseable> keep) throws Exception {
    for (AutoCloseable a : keep) {
      a.close();
    }
  }

  @ParameterizedTest(name = "{0} shards (0 = in-process)")
  @ValueSource(ints = {0, 2})
  void everyFormat_importsBitForBit_withFreshSlotsAndTheAskedFrequencies(int shards)
      throws Exception {
    List<AutoCloseable> keep = new ArrayList<>();
    try (TableClient c = LoopbackCluster.client(shards, dir.resolve("data"), keep)) {
      int n = 300;
      String[] k = keys(n);
      for (VectorImport.Format format : VectorImport.Format.values()) {
        float[] v = values(n, format.ordinal());
        String[] fileKeys = k.clone();
        if (format == VectorImport.Format.GLOVE) {
          fileKeys[7] = "new york"; // GloVe's Common Crawl files hold keys with spaces
        }
        Path f = dir.resolve("vectors." + format.cliName());
        switch (format) {
          case WORD2VEC_BINARY -> writeBinary(f, fileKeys, v, DIM);
          case GLOVE -> writeText(f, fileKeys, v, DIM, false);
          default -> writeText(f, fileKeys, v, DIM, true);
        }
        EmbeddingTable t = c.createTable(adam("t_" + format.ordinal(), 3)); // admission 3
        // a key trained before: the import resets its row, slots and update count
        t.count(new String[] {fileKeys[0], fileKeys[0], fileKeys[0]}, true);
        t.applyGradients(new String[] {fileKeys[0]}, values(1, 99), 0f, 4);
        VectorImport.Result r = VectorImport.run(t, f, format,
            new VectorImport.Options(9, 5, 64)); // several batches
        assertEquals(n, r.rows(), format.cliName());
        FindResult found = t.find(fileKeys);
        for (boolean b : found.found()) {
          assertTrue(b, format.cliName() + ": every key has a row, admission notwithstanding");
        }
        assertArrayEquals(v, found.rows(), format.cliName());
        long[] freq = t.count(fileKeys, false).frequencies();
        for (long x : freq) {
          assertEquals(5, x, format.cliName());
        }
        // two Adam steps on imported keys: the direct computation from fresh slots, t = 1, 2
        RowOptimizer opt = RowOptimizer.create(t.config().getOptimizer(), DIM);
        String[] two = {fileKeys[0], fileKeys[1]};
        float[] w = Arrays.copyOf(v, 2 * DIM);
        float[] s = new float[2 * DIM * opt.slots()];
        for (int i = 0; i < 2; i++) {
          opt.initSlots(s, i * DIM * opt.slots());
        }
        for (int step = 1; step <= 2; step++) {
          float[] g = values(2, 100 + step);
          t.applyGradients(two, g, 0f, 10 + step);
          for (int i = 0; i < 2; i++) {
            opt.apply(w, i * DIM, s, i * DIM * opt.slots(), g, i * DIM,
                t.config().getOptimizer().getLearningRate(), step);
          }
        }
        assertArrayEquals(w, t.find(two).rows(), format.cliName() + ": slots started afresh "
            + Arrays.toString(w) + " " + Arrays.toString(t.find(two).rows()));
        // importing again is harmless: the rows are the file's again
        VectorImport.run(t, f, format, VectorImport.Options.defaults());
        assertArrayEquals(v, t.find(fileKeys).rows(), format.cliName());
        assertEquals(5, t.count(new String[] {fileKeys[0]}, false).frequencies()[0],
            "without --frequency, counts stay");
      }
    } finally {
      close(keep);
    }
  }

  private static VectorImport.BadFileException refused(EmbeddingTable t, Path f,
      VectorImport.Format format, String expected) {
    long before = t.describe().getCounters().getKeys();
    VectorImport.BadFileException e = assertThrows(VectorImport.BadFileException.class,
        () -> VectorImport.run(t, f, format, VectorImport.Options.defaults()));
    assertTrue(e.getMessage().contains(expected), e.getMessage());
    assertTrue(e.getMessage().contains(f.toString()), e.getMessage());
    assertEquals(before, t.describe().getCounters().getKeys(), "a bad file changes nothing");
    return e;
  }

  @ParameterizedTest(name = "{0} shards (0 = in-process)")
  @ValueSource(ints = {0, 2})
  void aBadFile_isRefusedByLine_andChangesNothing(int shards) throws Exception {
    List<AutoCloseable> keep = new ArrayList<>();
    try (TableClient c = LoopbackCluster.client(shards, dir.resolve("data"), keep)) {
      EmbeddingTable t = c.createTable(adam("t", 1));
      String[] k = keys(20);
      float[] v = values(20, 1);
      Path f = dir.resolve("v.txt");
      VectorImport.Format text = VectorImport.Format.WORD2VEC_TEXT;

      writeText(f, k, new float[20 * (DIM + 1)], DIM + 1, true);
      refused(t, f, text, "line 1: the file's vectors have dim 7 but the table's dim is 6");

      writeText(f, k, v, DIM, true);
      List<String> lines = new ArrayList<>(Files.readAllLines(f));
      lines.set(5, lines.get(5).replaceFirst(" \\S+ $", " "));
      Files.write(f, lines);
      assertEquals(6, refused(t, f, text, "line 6: expected 6 values after key '" + k[4]
          + "' but found 5").entry());

      writeText(f, k, v, DIM, true);
      lines = new ArrayList<>(Files.readAllLines(f));
      lines.set(7, lines.get(7).replaceFirst(" \\S+ ", " 0.5x "));
      Files.write(f, lines);
      refused(t, f, text, "line 8: value 1 of key '" + k[6] + "' is not a number: '0.5x'");

      lines.set(7, lines.get(7).replace(" 0.5x ", " NaN "));
      Files.write(f, lines);
      refused(t, f, text, "line 8: value 1 of key '" + k[6] + "' is NaN");

      lines.set(7, lines.get(7).replace(" NaN ", " 1e30 "));
      Files.write(f, lines);
      refused(t, f, text, "value 1 of key '" + k[6] + "' is 1.0E30");

      String[] dup = k.clone();
      dup[15] = k[2];
      writeText(f, dup, v, DIM, true);
      refused(t, f, text, "line 17: key '" + k[2] + "' appears again (first at line 4)");

      writeText(f, k, v, DIM, true);
      lines = new ArrayList<>(Files.readAllLines(f));
      lines.set(0, "21 6");
      Files.write(f, lines);
      refused(t, f, text, "the header (line 1) announces 21 rows but the file holds 20");

      lines.set(0, "20 6");
      lines.add(10, "");
      Files.write(f, lines);
      refused(t, f, text, "line 11: the line is empty");

      writeText(f, k, v, DIM, true);
      byte[] bytes = Files.readAllBytes(f);
      int at = new String(bytes, StandardCharsets.ISO_8859_1).indexOf(k[3]);
      bytes[at] = (byte) 0xC3; // a lead byte without its continuation
      bytes[at + 1] = (byte) 'z';
      Files.write(f, bytes);
      refused(t, f, text, "line 5: the key is not valid UTF-8");

      String[] longKey = k.clone();
      longKey[1] = "k".repeat(300);
      writeText(f, longKey, v, DIM, true);
      refused(t, f, text, "line 3: key '" + "k".repeat(60) + "...' is 300 bytes long; the"
          + " table's max_key_bytes is 256");

      writeText(f, k, v, DIM, false);
      refused(t, f, text, "line 1: expected a header '<rows> <dim>'");
      writeText(f, k, new float[20 * (DIM + 2)], DIM + 2, false);
      refused(t, f, VectorImport.Format.GLOVE,
          "line 1: the file's vectors have dim 8 (fields after the key on line 1)");

      writeBinary(f, k, v, DIM);
      bytes = Files.readAllBytes(f);
      Files.write(f, Arrays.copyOf(bytes, bytes.length - 10));
      refused(t, f, VectorImport.Format.WORD2VEC_BINARY,
          "entry 20 (byte " + (bytes.length - (k[19] + " ").getBytes(StandardCharsets.UTF_8)
              .length - DIM * 4 - 1) + "): the file ends inside the vector of key '" + k[19]
              + "'");

      assertThrows(IllegalArgumentException.class, () -> VectorImport.Format.parse("gensim"));
      assertEquals(0, t.describe().getCounters().getKeys());
    } finally {
      close(keep);
    }
  }

  /**
   * The text formats' number parser (a fast path for plain decimals) gives what {@link
   * Float#parseFloat} gives, bit for bit, on what word2vec's C tool, GloVe, fastText and this
   * project's export write, and on edge cases; text that is not a number is NaN.
   */
  @org.junit.jupiter.api.Test
  void numbers_parseAsFloatParseFloatDoes() {
    Random r = new Random(3);
    List<String> cases = new ArrayList<>(List.of("0", "-0", "-0.0", "+1.5", "1.", ".5", "-.5",
        "0.000000", "16777217", "9999999", "0.1", "1e-05", "-1.2345E+2", "3.4028235e38",
        "1.4e-45", "7.006492e-46", "0.30000001", "123456.789", "1e10", "1e-10", "9999999e10",
        "9999999e-10", "0.00000000000000000001"));
    for (int i = 0; i < 20000; i++) {
      float f = Float.intBitsToFloat(r.nextInt());
      if (Float.isFinite(f)) {
        cases.add(Float.toString(f)); // this project's export
      }
      double d = r.nextGaussian() * Math.pow(10, r.nextInt(9) - 5);
      cases.add(String.format(java.util.Locale.ROOT, "%.6f", d)); // the C tool's %lf
      cases.add(String.format(java.util.Locale.ROOT, "%.5f", d));
      cases.add(String.format(java.util.Locale.ROOT, "%." + r.nextInt(9) + "e", d));
      cases.add(String.format(java.util.Locale.ROOT, "%.4g", d)); // fastText
    }
    for (String c : cases) {
      byte[] b = c.getBytes(StandardCharsets.US_ASCII);
      assertEquals(Float.floatToIntBits(Float.parseFloat(c)),
          Float.floatToIntBits(VectorImport.parseFloat(b, 0, b.length)), c);
    }
    for (String bad : new String[] {"", "-", ".", "1e", "1e+", "0.5x", "--1", "1..2", "e5"}) {
      byte[] b = bad.getBytes(StandardCharsets.US_ASCII);
      assertTrue(Float.isNaN(VectorImport.parseFloat(b, 0, b.length)), "'" + bad + "'");
    }
  }

  @ParameterizedTest(name = "{0} shards (0 = in-process)")
  @ValueSource(ints = {0, 2})
  void assign_checksTheBatchWhole(int shards) throws Exception {
    List<AutoCloseable> keep = new ArrayList<>();
    try (TableClient c = LoopbackCluster.client(shards, dir.resolve("data"), keep)) {
      EmbeddingTable t = c.createTable(adam("t", 1));
      String[] k = keys(40);
      float[] v = values(40, 2);
      v[39 * DIM + 2] = Float.POSITIVE_INFINITY; // the last key: whatever shard owns it
      TableException e = assertThrows(TableException.class, () -> t.assign(k, v, null, 0));
      assertTrue(e.getMessage().contains("column 2 is Infinity"), e.getMessage());
      String[] dup = k.clone();
      dup[30] = k[3];
      e = assertThrows(TableException.class, () -> t.assign(dup, values(40, 2), null, 0));
      assertTrue(e.getMessage().contains("key '" + k[3] + "' is given twice (keys 3 and 30)"),
          e.getMessage());
      e = assertThrows(TableException.class,
          () -> t.assign(k, values(40, 2), new long[39], 0));
      assertTrue(e.getMessage().contains("39 frequencies for 40 keys"), e.getMessage());
      assertEquals(0, t.describe().getCounters().getKeys(), "refused whole: nothing assigned");
    } finally {
      close(keep);
    }
  }
}
