package dev.dynembed.word2vec;

import java.awt.BasicStroke;
import java.awt.Color;
import java.awt.Font;
import java.awt.Graphics2D;
import java.awt.RenderingHints;
import java.awt.image.BufferedImage;
import java.io.IOException;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import javax.imageio.ImageIO;

/** The training loss against words trained, as {@code loss.csv} and {@code loss-curve.png}. */
final class LossCurve {
  private LossCurve() {}

  static void write(Path dir, List<double[]> points, String title) throws IOException {
    try (Writer w = Files.newBufferedWriter(dir.resolve("loss.csv"), StandardCharsets.UTF_8)) {
      w.write("words,loss_per_pair\n");
      for (double[] p : points) {
        w.write((long) p[0] + "," + p[1] + "\n");
      }
    }
    System.setProperty("java.awt.headless", "true");
    int width = 900;
    int height = 500;
    int left = 80;
    int right = 60;
    int top = 50;
    int bottom = 60;
    BufferedImage img = new BufferedImage(width, height, BufferedImage.TYPE_INT_RGB);
    Graphics2D g = img.createGraphics();
    g.setRenderingHint(RenderingHints.KEY_ANTIALIASING, RenderingHints.VALUE_ANTIALIAS_ON);
    g.setColor(Color.WHITE);
    g.fillRect(0, 0, width, height);
    g.setColor(Color.BLACK);
    g.setFont(new Font(Font.SANS_SERIF, Font.PLAIN, 14));
    g.drawString(title, left, 30);
    g.drawLine(left, height - bottom, width - right, height - bottom);
    g.drawLine(left, top, left, height - bottom);
    g.drawString("words trained", width / 2 - 40, height - 20);
    g.drawString("loss", 20, top - 10);
    double maxX = 1;
    double minY = Double.POSITIVE_INFINITY;
    double maxY = Double.NEGATIVE_INFINITY;
    for (double[] p : points) {
      if (Double.isFinite(p[1])) {
        maxX = Math.max(maxX, p[0]);
        minY = Math.min(minY, p[1]);
        maxY = Math.max(maxY, p[1]);
      }
    }
    if (!Double.isFinite(minY)) {
      minY = 0;
      maxY = 1;
    }
    if (maxY - minY < 1e-9) {
      maxY = minY + 1;
    }
    int pw = width - left - right;
    int ph = height - top - bottom;
    g.setFont(new Font(Font.SANS_SERIF, Font.PLAIN, 11));
    for (int i = 0; i <= 4; i++) {
      double y = minY + (maxY - minY) * i / 4;
      int py = height - bottom - ph * i / 4;
      g.drawString(String.format("%.3f", y), 10, py + 4);
      g.drawString(String.format("%,.0f", maxX * i / 4), left + pw * i / 4 - 20, height - bottom + 18);
    }
    g.setColor(new Color(30, 90, 200));
    g.setStroke(new BasicStroke(2f));
    int px = -1;
    int py = -1;
    for (double[] p : points) {
      if (!Double.isFinite(p[1])) {
        continue;
      }
      int x = left + (int) (pw * p[0] / maxX);
      int y = height - bottom - (int) (ph * (p[1] - minY) / (maxY - minY));
      if (px >= 0) {
        g.drawLine(px, py, x, y);
      }
      px = x;
      py = y;
    }
    g.dispose();
    ImageIO.write(img, "png", dir.resolve("loss-curve.png").toFile());
  }
}
