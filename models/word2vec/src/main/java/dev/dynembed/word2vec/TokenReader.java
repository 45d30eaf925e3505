package dev.dynembed.word2vec;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.StandardOpenOption;
import java.util.List;

/**
 * Streams the words of one {@link TextSplits.Split}: whitespace-separated UTF-8 tokens, read
 * through a 1 MiB buffer (never the whole file: text8 is one 100 MB line). A sentence ends at a
 * newline or after {@value #MAX_SENTENCE} words (as in word2vec's C tool). Words longer than the
 * table's key limit are skipped and counted. A NUL byte (binary data) or invalid UTF-8 is a
 * {@link CorpusException} naming the file and byte offset.
 */
final class TokenReader implements AutoCloseable {
  static final int MAX_SENTENCE = 1000;

  private final TextSplits.Split split;
  private final int maxWordBytes;
  private final FileChannel ch;
  private final ByteBuffer buf = ByteBuffer.allocate(1 << 20);
  private final CharsetDecoder utf8 = StandardCharsets.UTF_8.newDecoder()
      .onMalformedInput(CodingErrorAction.REPORT).onUnmappableCharacter(CodingErrorAction.REPORT);
  private byte[] word = new byte[64];
  private long pos; // absolute offset of the next byte in buf
  private boolean eof;
  private long skippedLong;

  TokenReader(TextSplits.Split split, int maxWordBytes) {
    this.split = split;
    this.maxWordBytes = maxWordBytes;
    try {
      this.ch = FileChannel.open(split.file(), StandardOpenOption.READ);
      long start = split.start();
      if (start > 0) {
        // the word straddling the start belongs to the previous range: skip to a separator
        ch.position(start - 1);
        pos = start - 1;
        buf.limit(0);
        int b;
        while ((b = next()) >= 0 && !isSpace(b)) {
          // skip
        }
      } else {
        ch.position(0);
        buf.limit(0);
      }
    } catch (IOException e) {
      throw new CorpusException("cannot read " + split.file() + ": " + e.getMessage(), e);
    }
  }

  private static boolean isSpace(int b) {
    return b == ' ' || b == '\n' || b == '\t' || b == '\r' || b == '\f' || b == 0x0B;
  }

  /** The next byte, or -1 at end of file. */
  private int next() throws IOException {
    if (!buf.hasRemaining()) {
      if (eof) {
        return -1;
      }
      buf.clear();
      int r = ch.read(buf);
      buf.flip();
      if (r <= 0) {
        eof = true;
        return -1;
      }
    }
    pos++;
    return buf.get() & 0xFF;
  }

  /** Bytes of the range consumed so far (for progress), at most the range's size. */
  long consumed() {
    return Math.max(0, Math.min(pos, split.end()) - split.start());
  }

  long skippedLongWords() {
    return skippedLong;
  }

  /**
   * Reads the next sentence into {@code out} (cleared first).
   *
   * @return false when the range holds no more words
   */
  boolean nextSentence(List<String> out) {
    out.clear();
    try {
      while (true) {
        int b = next();
        // skip separators; a newline ends a non-empty sentence
        while (b >= 0 && isSpace(b)) {
          if (b == '\n' && !out.isEmpty()) {
            return true;
          }
          b = next();
        }
        if (b < 0 || pos - 1 >= split.end()) {
          pos = Math.max(pos, split.end());
          return !out.isEmpty();
        }
        long wordStart = pos - 1;
        int len = 0;
        boolean ascii = true;
        while (b >= 0 && !isSpace(b)) {
          if (b == 0) {
            throw new CorpusException(split.file() + ": NUL byte at offset " + (pos - 1)
                + ": this looks like a binary file, not text");
          }
          if (len == word.length) {
            word = java.util.Arrays.copyOf(word, len * 2);
          }
          word[len++] = (byte) b;
          ascii &= b < 0x80;
          b = next();
        }
        boolean endsSentence = b == '\n';
        if (len > maxWordBytes) {
          skippedLong++;
        } else {
          out.add(ascii ? new String(word, 0, len, StandardCharsets.ISO_8859_1)
              : decode(len, wordStart));
        }
        if (out.size() >= MAX_SENTENCE || (endsSentence && !out.isEmpty())) {
          return true;
        }
        if (b < 0) {
          return !out.isEmpty();
        }
      }
    } catch (IOException e) {
      throw new CorpusException("cannot read " + split.file() + ": " + e.getMessage(), e);
    }
  }

  private String decode(int len, long offset) {
    try {
      CharBuffer cb = utf8.reset().decode(ByteBuffer.wrap(word, 0, len));
      return cb.toString();
    } catch (CharacterCodingException e) {
      throw new CorpusException(split.file() + ": invalid UTF-8 in the word at byte offset "
          + offset + " (the corpus must be UTF-8 text)");
    }
  }

  @Override
  public void close() {
    try {
      ch.close();
    } catch (IOException ignored) {
      // read-only
    }
  }
}
