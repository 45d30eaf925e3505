package dev.dynembed.table.client;

import dev.dynembed.table.common.KeyHashing;
import dev.dynembed.table.common.Limits;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.CharBuffer;
import java.nio.channels.Channels;
import java.nio.channels.FileChannel;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayDeque;
import java.util.Arrays;
import java.util.Locale;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

/**
 * Imports vectors trained elsewhere into a table (docs/design/0024-vectors-in.md): word2vec's text
 * and binary formats, GloVe's text format, fastText's {@code .vec} text format. Streaming: the
 * file is read twice, never held in memory; the first pass checks it whole (every value, the
 * width, the header's count, keys twice in the file) so that <em>a bad file changes nothing</em>,
 * the second sends its rows in batches through {@link EmbeddingTable#assign} (over shards, each
 * batch split over them and sent in parallel; two batches in flight while the next is parsed).
 * Memory: 16 bytes per distinct key for the duplicate check, plus the batches in flight.
 *
 * <p>A failure in the second pass (a shard down past the client's retries) leaves the batches
 * sent so far assigned; importing the same file again is safe (an assign sets rows, so a second
 * one leaves what the first left).
 */
public final class VectorImport {
  private VectorImport() {}

  /** Batches sent at once (each split over the shards and sent to them in parallel). */
  private static final int SENDERS = 2;

  /** The file formats, by their command-line names. */
  public enum Format {
    /** word2vec's {@code -binary 0}: a {@code "<rows> <dim>"} line, then {@code key v1 .. vdim}. */
    WORD2VEC_TEXT("word2vec-text"),
    /**
     * word2vec's {@code -binary 1}: a {@code "<rows> <dim>"} line, then per key its bytes, a
     * space, dim float32 little-endian values and (as the C tool writes) a newline.
     */
    WORD2VEC_BINARY("word2vec-binary"),
    /**
     * GloVe's text output: {@code key v1 .. vdim} lines, no header; the first line gives the
     * width. A later line with more fields has a key with spaces (GloVe's Common Crawl vectors
     * hold such keys): its last dim fields are the values.
     */
    GLOVE("glove"),
    /** fastText's {@code .vec} file: word2vec's text format ({@code .bin} models are not read). */
    FASTTEXT("fasttext");

    private final String cliName;

    Format(String cliName) {
      this.cliName = cliName;
    }

    public String cliName() {
      return cliName;
    }

    /** The format of a command-line name; the error lists the names. */
    public static Format parse(String name) {
      for (Format f : values()) {
        if (f.cliName.equals(name.toLowerCase(Locale.ROOT))) {
          return f;
        }
      }
      throw new IllegalArgumentException("unknown vector format '" + name + "'; expected one of "
          + Arrays.stream(values()).map(Format::cliName).toList());
    }
  }

  /**
   * How rows are imported.
   *
   * @param step the last-update step recorded for every imported key
   * @param frequency each imported key's frequency is set to it; negative: counts are left as
   *     they are (0 for a key the import creates), so that sampling and subsampling weigh a key
   *     by what training counts of it
   * @param batchRows rows per assign call (capped so that a batch stays within the call limits)
   */
  public record Options(long step, long frequency, int batchRows) {
    public Options {
      if (batchRows < 1) {
        throw new IllegalArgumentException("batchRows must be >= 1 but was " + batchRows);
      }
    }

    public static Options defaults() {
      return new Options(0, -1, 4096);
    }
  }

  /**
   * What an import did.
   *
   * @param rows rows assigned
   * @param checkNanos the first pass (reading and checking the file)
   * @param importNanos the second pass (reading and sending)
   */
  public record Result(long rows, int dim, long checkNanos, long importNanos) {
    /** Rows per second over both passes. */
    public double rowsPerSecond() {
      return rows / ((checkNanos + importNanos) / 1e9);
    }
  }

  /** A file that cannot be imported, with where (1-based line, or entry of a binary file). */
  public static final class BadFileException extends IllegalArgumentException {
    private final long entry;

    BadFileException(String message, long entry) {
      super(message);
      this.entry = entry;
    }

    /** The line (text formats; the header is line 1) or entry (binary) at fault; 0: none. */
    public long entry() {
      return entry;
    }
  }

  /** Checks then imports {@code file} into {@code table}; nothing is sent if the check fails. */
  public static Result run(EmbeddingTable table, Path file, Format format, Options options) {
    int dim = table.dim();
    int maxKeyBytes = table.config().getMaxKeyBytes();
    long t0 = System.nanoTime();
    long rows = check(file, format, dim, maxKeyBytes);
    long t1 = System.nanoTime();
    int batch = (int) Math.min(Math.min(options.batchRows(), Limits.MAX_BATCH_KEYS),
        Math.max(1, (Limits.MAX_BATCH_FLOATS / 4) / dim));
    long sent = 0;
    // batches hold distinct keys (checked), so their order does not matter: SENDERS of them in
    // flight while the next is parsed
    ExecutorService sender = Executors.newFixedThreadPool(SENDERS, r -> {
      Thread t = new Thread(r, "vector-import");
      t.setDaemon(true);
      return t;
    });
    ArrayDeque<Future<Integer>> inFlight = new ArrayDeque<>();
    try (Reader r = Reader.open(file, format, 0, dim, maxKeyBytes)) {
      while (true) {
        String[] keys = new String[batch];
        float[] values = new float[batch * dim];
        int n = 0;
        while (n < batch && r.next()) {
          keys[n] = r.key;
          System.arraycopy(r.values, 0, values, n * dim, dim);
          n++;
        }
        if (n == 0) {
          break;
        }
        String[] k = n == batch ? keys : Arrays.copyOf(keys, n);
        float[] v = n == batch ? values : Arrays.copyOf(values, n * dim);
        long[] f = null;
        if (options.frequency() >= 0) {
          f = new long[n];
          Arrays.fill(f, options.frequency());
        }
        long[] freq = f;
        inFlight.add(sender.submit(() -> table.assign(k, v, freq, options.step())));
        while (inFlight.size() > SENDERS) {
          sent += await(inFlight.poll(), sent, file);
        }
      }
      while (!inFlight.isEmpty()) {
        sent += await(inFlight.poll(), sent, file);
      }
    } catch (IOException e) {
      throw new UncheckedIOException("reading " + file + " (" + sent + " rows assigned before;"
          + " importing the file again is safe)", e);
    } finally {
      for (Future<Integer> f : inFlight) {
        f.cancel(false);
      }
      sender.shutdownNow();
    }
    if (sent != rows) {
      throw new IllegalStateException("table '" + table.name() + "': " + sent + " rows assigned"
          + " but the file holds " + rows + " (did it change during the import?)");
    }
    return new Result(rows, dim, t1 - t0, System.nanoTime() - t1);
  }

  private static int await(Future<Integer> f, long sent, Path file) {
    try {
      return f.get();
    } catch (ExecutionException e) {
      Throwable c = e.getCause();
      String more = " (importing " + file + ": " + sent + " rows assigned before this batch;"
          + " importing the file again is safe)";
      if (c instanceof dev.dynembed.table.common.TableException te) {
        throw new dev.dynembed.table.common.TableException(te.code(), te.getMessage() + more);
      }
      if (c instanceof RuntimeException re) {
        throw re;
      }
      throw new IllegalStateException(c.getMessage() + more, c);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted importing " + file, e);
    }
  }

  /**
   * Reads the whole file and checks it against a table of width {@code dim}: the header (its
   * width, and its row count against the rows found), every line's field count, every value (a
   * number, finite, within the rows' range), every key (1..maxKeyBytes bytes of UTF-8, once in
   * the file).
   *
   * @return the rows the file holds
   * @throws BadFileException naming the file, the line or entry, and what is wrong
   */
  public static long check(Path file, Format format, int dim, int maxKeyBytes) {
    KeyIndex seen = new KeyIndex();
    long rows = 0;
    try (Reader r = Reader.open(file, format, 0, dim, maxKeyBytes)) {
      while (r.next()) {
        long h = KeyHashing.hash(r.keyBytes, 0, r.keyLength);
        long before = seen.putIfAbsent(h, r.entryOffset);
        if (before >= 0 && sameKey(file, format, dim, maxKeyBytes, before, r.key)) {
          throw r.bad("key '%s' appears again (first at %s %d); a file gives each key one row",
              r.key, format == Format.WORD2VEC_BINARY ? "entry" : "line",
              entryAt(file, format, dim, maxKeyBytes, before));
        }
        rows++;
      }
      if (r.headerRows >= 0 && r.headerRows != rows) {
        throw new BadFileException(String.format("%s: the header (line 1) announces %d rows but"
            + " the file holds %d", file, r.headerRows, rows), 1);
      }
    } catch (IOException e) {
      throw new UncheckedIOException("reading " + file, e);
    }
    if (rows == 0) {
      throw new BadFileException(file + ": the file holds no vectors", 0);
    }
    return rows;
  }

  /** Whether the entry at {@code offset} has this key (a hash seen twice: the same key?). */
  private static boolean sameKey(Path file, Format format, int dim, int maxKeyBytes, long offset,
      String key) throws IOException {
    try (Reader r = Reader.open(file, format, offset, dim, maxKeyBytes)) {
      return r.next() && r.key.equals(key);
    }
  }

  /** The line (or entry) number of the entry at {@code offset}: read up to it again. */
  private static long entryAt(Path file, Format format, int dim, int maxKeyBytes, long offset)
      throws IOException {
    try (Reader r = Reader.open(file, format, 0, dim, maxKeyBytes)) {
      while (r.next()) {
        if (r.entryOffset == offset) {
          return r.entry;
        }
      }
    }
    return -1;
  }

  /** Key hash to the file offset of its first entry: open addressing, 16 bytes per key. */
  private static final class KeyIndex {
    private long[] hashes = new long[1 << 12];
    private long[] offsets = new long[1 << 12];
    private int size;

    /** The offset stored for {@code h}, or -1 after storing {@code offset} for it. */
    long putIfAbsent(long h, long offset) {
      long k = h == 0 ? 1 : h; // 0 marks a free slot; a collision is checked by the key
      int mask = hashes.length - 1;
      for (int i = (int) KeyHashing.mix(k) & mask; ; i = (i + 1) & mask) {
        if (hashes[i] == 0) {
          hashes[i] = k;
          offsets[i] = offset;
          if (++size * 2 > hashes.length) {
            grow();
          }
          return -1;
        }
        if (hashes[i] == k) {
          return offsets[i];
        }
      }
    }

    private void grow() {
      long[] oh = hashes;
      long[] oo = offsets;
      hashes = new long[oh.length * 2];
      offsets = new long[oh.length * 2];
      int mask = hashes.length - 1;
      for (int j = 0; j < oh.length; j++) {
        if (oh[j] != 0) {
          int i = (int) KeyHashing.mix(oh[j]) & mask;
          while (hashes[i] != 0) {
            i = (i + 1) & mask;
          }
          hashes[i] = oh[j];
          offsets[i] = oo[j];
        }
      }
    }
  }

  // ------------------------------------------------------------------ readers

  /** Entries of a file in order: each {@link #next} sets key, its UTF-8 bytes and values. */
  private abstract static class Reader implements AutoCloseable {
    final Path file;
    final int dim;
    final int maxKeyBytes;
    private final InputStream in;
    private final FileChannel channel;
    /** The byte offset of the next unread byte. */
    long offset;
    /** The current entry's line (text; the header is line 1) or entry number (binary). */
    long entry;
    /** The byte offset where the current entry starts. */
    long entryOffset;
    /** Rows the header announces, or -1 (no header read: GloVe, or a read from an entry). */
    long headerRows = -1;
    String key;
    byte[] keyBytes = new byte[64];
    int keyLength;
    final float[] values;
    final CharsetDecoder utf8 = StandardCharsets.UTF_8.newDecoder()
        .onMalformedInput(CodingErrorAction.REPORT)
        .onUnmappableCharacter(CodingErrorAction.REPORT);

    Reader(Path file, long start, int dim, int maxKeyBytes) throws IOException {
      this.file = file;
      this.dim = dim;
      this.maxKeyBytes = maxKeyBytes;
      this.values = new float[dim];
      this.channel = FileChannel.open(file, StandardOpenOption.READ);
      channel.position(start);
      this.in = Channels.newInputStream(channel);
      this.offset = start;
    }

    static Reader open(Path file, Format format, long start, int dim, int maxKeyBytes)
        throws IOException {
      Reader r = format == Format.WORD2VEC_BINARY
          ? new BinaryReader(file, start, dim, maxKeyBytes)
          : new TextReader(file, start, dim, maxKeyBytes, format == Format.GLOVE);
      try {
        if (start == 0 && format != Format.GLOVE) {
          r.readHeader();
        }
        return r;
      } catch (RuntimeException | IOException e) {
        r.close();
        throw e;
      }
    }

    /** Reads the next entry; false at the end of the file. */
    abstract boolean next() throws IOException;

    /** What is at fault, where. */
    abstract BadFileException bad(String format, Object... args);

    /** Read ahead of the entries: buf[pos, limit). */
    private final byte[] buf = new byte[1 << 16];
    private int pos;
    private int limit;

    private boolean fill() throws IOException {
      int n = in.read(buf, 0, buf.length);
      pos = 0;
      limit = Math.max(n, 0);
      return n > 0;
    }

    int read() throws IOException {
      if (pos == limit && !fill()) {
        return -1;
      }
      offset++;
      return buf[pos++] & 0xFF;
    }

    int readFully(byte[] out, int n) throws IOException {
      int got = 0;
      while (got < n) {
        if (pos == limit && !fill()) {
          break;
        }
        int k = Math.min(n - got, limit - pos);
        System.arraycopy(buf, pos, out, got, k);
        pos += k;
        got += k;
      }
      offset += got;
      return got;
    }

    /** Reads a line's bytes into {@code line} (without its newline); null at the end. */
    byte[] line = new byte[256];
    int lineLength;

    boolean readLine() throws IOException {
      lineLength = 0;
      if (pos == limit && !fill()) {
        return false;
      }
      while (true) {
        int end = pos;
        while (end < limit && buf[end] != '\n') {
          end++;
        }
        int k = end - pos;
        if (lineLength + k > line.length) {
          if (lineLength + k > 1 << 28) {
            throw bad("a line longer than %d bytes", 1 << 28);
          }
          line = Arrays.copyOf(line, Math.max(line.length * 2, lineLength + k));
        }
        System.arraycopy(buf, pos, line, lineLength, k);
        lineLength += k;
        offset += k;
        pos = end;
        if (end < limit) { // the newline
          pos++;
          offset++;
          break;
        }
        if (!fill()) {
          break; // the last line has no newline
        }
      }
      if (lineLength > 0 && line[lineLength - 1] == '\r') {
        lineLength--;
      }
      return true;
    }

    String decode(byte[] bytes, int off, int len, String what) {
      String fast = new String(bytes, off, len, StandardCharsets.UTF_8);
      if (fast.indexOf('\uFFFD') < 0) {
        return fast; // no replacement character: the bytes were valid UTF-8
      }
      try { // a replacement: malformed input, or a U+FFFD the file holds
        CharBuffer c = utf8.reset().decode(ByteBuffer.wrap(bytes, off, len));
        return c.toString();
      } catch (CharacterCodingException e) {
        throw bad("%s is not valid UTF-8", what);
      }
    }

    /** A word2vec header: {@code "<rows> <dim>"}; its width must be the table's. */
    void readHeader() throws IOException {
      entry = 1;
      if (!readLine()) {
        throw new BadFileException(file + " is empty", 0);
      }
      String h = decode(line, 0, lineLength, "the header (line 1)").trim();
      String[] f = h.split("[ \t]+");
      long rows;
      long width;
      try {
        if (f.length != 2) {
          throw new NumberFormatException();
        }
        rows = Long.parseLong(f[0]);
        width = Long.parseLong(f[1]);
      } catch (NumberFormatException e) {
        throw new BadFileException(String.format("%s line 1: expected a header '<rows> <dim>'"
            + " but found '%s' (is the format right? GloVe files have no header)", file,
            h.length() > 80 ? h.substring(0, 80) + "..." : h), 1);
      }
      if (rows < 0 || width < 1) {
        throw new BadFileException(String.format("%s line 1: the header '%s' gives no rows or"
            + " width", file, h), 1);
      }
      if (width != dim) {
        throw new BadFileException(String.format("%s line 1: the file's vectors have dim %d but"
            + " the table's dim is %d", file, width, dim), 1);
      }
      headerRows = rows;
    }

    void checkKey() {
      if (keyLength == 0) {
        throw bad("the key is empty");
      }
      if (keyLength > maxKeyBytes) {
        throw bad("key '%s' is %d bytes long; the table's max_key_bytes is %d",
            abbreviate(key), keyLength, maxKeyBytes);
      }
    }

    void checkValue(int j, float v) {
      if (!(Math.abs(v) <= Limits.MAX_ROW_VALUE)) {
        throw bad("value %d of key '%s' is %s; rows hold finite values within +-%s", j + 1,
            abbreviate(key), v, Limits.MAX_ROW_VALUE);
      }
      values[j] = v;
    }

    @Override
    public void close() throws IOException {
      in.close();
      channel.close();
    }
  }

  static String abbreviate(String s) {
    return s.length() > 60 ? s.substring(0, 60) + "..." : s;
  }

  /** word2vec text, fastText .vec, GloVe. */
  private static final class TextReader extends Reader {
    private final boolean glove;
    private int[] starts = new int[128];
    private int[] ends = new int[128];

    TextReader(Path file, long start, int dim, int maxKeyBytes, boolean glove)
        throws IOException {
      super(file, start, dim, maxKeyBytes);
      this.glove = glove;
    }

    @Override
    boolean next() throws IOException {
      entryOffset = offset;
      if (!readLine()) {
        return false;
      }
      entry++;
      int fields = split();
      if (fields == 0) { // blank lines may end the file, nothing else may follow them
        long blank = entry;
        while (readLine()) {
          entry++;
          if (split() > 0) {
            throw new BadFileException(file + " line " + blank + ": the line is empty", blank);
          }
        }
        return false;
      }
      int keyFields;
      if (glove) {
        if (entryOffset == 0 && fields - 1 != dim) {
          throw bad("the file's vectors have dim %d (fields after the key on line 1) but the"
              + " table's dim is %d", fields - 1, dim);
        }
        keyFields = fields - dim;
        if (keyFields < 1) {
          key = decode(line, starts[0], ends[0] - starts[0], "the key");
          throw bad("expected %d values after key '%s' but found %d", dim, abbreviate(key),
              fields - 1);
        }
      } else {
        keyFields = 1;
      }
      int kEnd = ends[keyFields - 1];
      keyLength = kEnd - starts[0];
      if (keyBytes.length < keyLength) {
        keyBytes = new byte[Math.max(keyLength, keyBytes.length * 2)];
      }
      System.arraycopy(line, starts[0], keyBytes, 0, keyLength);
      key = decode(line, starts[0], keyLength, "the key");
      if (!glove && fields - 1 != dim) {
        throw bad("expected %d values after key '%s' but found %d", dim, abbreviate(key),
            fields - 1);
      }
      checkKey();
      for (int j = 0; j < dim; j++) {
        int f = keyFields + j;
        float v = parseFloat(line, starts[f], ends[f]);
        if (Float.isNaN(v) && !isNaNText(line, starts[f], ends[f])) {
          String s = new String(line, starts[f], ends[f] - starts[f], StandardCharsets.UTF_8);
          throw bad("value %d of key '%s' is not a number: '%s'", j + 1, abbreviate(key),
              abbreviate(s));
        }
        checkValue(j, v);
      }
      return true;
    }

    private static boolean isNaNText(byte[] b, int from, int to) {
      String s = new String(b, from, to - from, StandardCharsets.ISO_8859_1);
      try {
        return Float.isNaN(Float.parseFloat(s));
      } catch (NumberFormatException e) {
        return false;
      }
    }

    /** Splits the line at spaces and tabs; returns the field count. */
    private int split() {
      int n = 0;
      int i = 0;
      while (i < lineLength) {
        while (i < lineLength && (line[i] == ' ' || line[i] == '\t')) {
          i++;
        }
        if (i == lineLength) {
          break;
        }
        int s = i;
        while (i < lineLength && line[i] != ' ' && line[i] != '\t') {
          i++;
        }
        if (n == starts.length) {
          starts = Arrays.copyOf(starts, n * 2);
          ends = Arrays.copyOf(ends, n * 2);
        }
        starts[n] = s;
        ends[n] = i;
        n++;
      }
      return n;
    }

    @Override
    BadFileException bad(String format, Object... args) {
      return new BadFileException(file + " line " + entry + ": " + String.format(format, args),
          entry);
    }
  }

  private static final float[] POW10 = {1e0f, 1e1f, 1e2f, 1e3f, 1e4f, 1e5f, 1e6f, 1e7f, 1e8f,
      1e9f, 1e10f};

  /**
   * The float a decimal field denotes, as {@link Float#parseFloat} gives it; NaN for text that is
   * not a number. Plain decimals of at most 7 significant digits and a small exponent (what
   * word2vec's {@code %lf} and GloVe write) take Clinger's fast path: the digits as an exact
   * float, times or divided by an exact power of ten, one rounding, so the result is the
   * correctly rounded one; anything else goes to {@link Float#parseFloat}.
   */
  static float parseFloat(byte[] b, int from, int to) {
    int i = from;
    boolean negative = false;
    if (i < to && (b[i] == '-' || b[i] == '+')) {
      negative = b[i] == '-';
      i++;
    }
    long digits = 0;
    int significant = 0;
    int scale = 0; // digits after the point
    boolean any = false;
    boolean point = false;
    for (; i < to; i++) {
      int c = b[i];
      if (c >= '0' && c <= '9') {
        any = true;
        if (digits == 0 && c == '0') {
          if (point) {
            scale++;
          }
          continue; // leading zeros are not significant
        }
        if (++significant > 7) {
          return slow(b, from, to);
        }
        digits = digits * 10 + (c - '0');
        if (point) {
          scale++;
        }
      } else if (c == '.' && !point) {
        point = true;
      } else {
        break;
      }
    }
    int exp = 0;
    if (i < to) { // an exponent, or not a plain decimal
      if ((b[i] != 'e' && b[i] != 'E') || !any) {
        return slow(b, from, to);
      }
      i++;
      boolean expNegative = false;
      if (i < to && (b[i] == '-' || b[i] == '+')) {
        expNegative = b[i] == '-';
        i++;
      }
      if (i == to || to - i > 3) {
        return slow(b, from, to);
      }
      for (; i < to; i++) {
        if (b[i] < '0' || b[i] > '9') {
          return slow(b, from, to);
        }
        exp = exp * 10 + (b[i] - '0');
      }
      if (expNegative) {
        exp = -exp;
      }
    }
    if (!any) {
      return slow(b, from, to);
    }
    int e = exp - scale;
    float v;
    if (digits == 0) {
      v = 0f;
    } else if (e >= 0 && e <= 10) {
      v = (float) digits * POW10[e];
    } else if (e < 0 && e >= -10) {
      v = (float) digits / POW10[-e];
    } else {
      return slow(b, from, to);
    }
    return negative ? -v : v;
  }

  private static float slow(byte[] b, int from, int to) {
    try {
      return Float.parseFloat(new String(b, from, to - from, StandardCharsets.ISO_8859_1));
    } catch (NumberFormatException e) {
      return Float.NaN;
    }
  }

  /** word2vec binary: key bytes, a space, dim float32 little-endian, an optional newline. */
  private static final class BinaryReader extends Reader {
    private final byte[] raw;
    private final ByteBuffer rawView;

    BinaryReader(Path file, long start, int dim, int maxKeyBytes) throws IOException {
      super(file, start, dim, maxKeyBytes);
      raw = new byte[dim * 4];
      rawView = ByteBuffer.wrap(raw).order(ByteOrder.LITTLE_ENDIAN);
    }

    @Override
    void readHeader() throws IOException {
      super.readHeader();
      entry = 0;
    }

    @Override
    boolean next() throws IOException {
      int b = read();
      while (b == '\n') { // the C tool ends each vector with one
        b = read();
      }
      if (b < 0) {
        return false;
      }
      entry++;
      entryOffset = offset - 1;
      keyLength = 0;
      key = "";
      while (b != ' ') {
        if (b < 0) {
          throw bad("the file ends inside a key");
        }
        if (keyLength == maxKeyBytes) {
          key = decode(keyBytes, 0, Math.min(keyLength, 60), "the key");
          throw bad("a key longer than the table's max_key_bytes (%d) starts '%s'",
              maxKeyBytes, key);
        }
        if (keyLength == keyBytes.length) {
          keyBytes = Arrays.copyOf(keyBytes, keyBytes.length * 2);
        }
        keyBytes[keyLength++] = (byte) b;
        b = read();
      }
      key = decode(keyBytes, 0, keyLength, "the key");
      checkKey();
      if (readFully(raw, raw.length) != raw.length) {
        throw bad("the file ends inside the vector of key '%s'", abbreviate(key));
      }
      for (int j = 0; j < dim; j++) {
        checkValue(j, rawView.getFloat(j * 4));
      }
      return true;
    }

    @Override
    BadFileException bad(String format, Object... args) {
      return new BadFileException(file + " entry " + entry + " (byte " + entryOffset + "): "
          + String.format(format, args), entry);
    }
  }
}
