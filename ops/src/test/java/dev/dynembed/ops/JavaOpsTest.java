package dev.dynembed.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

class JavaOpsTest {
  @Test
  void quietOut_dropsSameDiffsChatterOnly() {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    PrintStream out = new JavaOps.QuietOut(new PrintStream(bytes, true, StandardCharsets.UTF_8));
    out.println("Added differentiated op dynembed_lookup");
    out.println("progress 10%");
    out.println((String) null);
    out.println("an Added differentiated op inside a line stays");
    out.print("Added differentiated op printed without a newline stays");
    out.flush();
    assertEquals("progress 10%\nnull\nan Added differentiated op inside a line stays\n"
        + "Added differentiated op printed without a newline stays",
        bytes.toString(StandardCharsets.UTF_8).replace(System.lineSeparator(), "\n"));
  }
}
