package medsnip.anserini;

import java.io.IOException;
import java.nio.file.Paths;
import org.apache.lucene.analysis.core.KeywordAnalyzer;
import org.apache.lucene.index.IndexWriter;
import org.apache.lucene.index.IndexWriterConfig;
import org.apache.lucene.store.Directory;
import org.apache.lucene.store.FSDirectory;

/**
 * Merges Lucene indexes built separately (one IndexCollection run per group of corpus shards) into one
 * index with IndexWriter.addIndexes: segments are copied as they are, nothing is re-analyzed, and the
 * statistics BM25 reads at search time (document counts, document frequencies, total term frequencies,
 * norms) are sums over segments, so the merged index scores exactly like one built in a single run.
 *
 * <p>Usage: MergeIndexes TARGET PART [PART ...]; TARGET must not exist yet. Prints the merged count.
 */
public final class MergeIndexes {
  private MergeIndexes() {}

  public static void main(String[] args) throws IOException {
    if (args.length < 2) {
      System.err.println("usage: MergeIndexes TARGET PART [PART ...]");
      System.exit(2);
    }
    Directory[] parts = new Directory[args.length - 1];
    for (int i = 1; i < args.length; i++) {
      parts[i - 1] = FSDirectory.open(Paths.get(args[i]));
    }
    // The analyzer is never used: addIndexes copies segments without analyzing anything.
    IndexWriterConfig config = new IndexWriterConfig(new KeywordAnalyzer());
    config.setOpenMode(IndexWriterConfig.OpenMode.CREATE);
    try (Directory target = FSDirectory.open(Paths.get(args[0]));
        IndexWriter writer = new IndexWriter(target, config)) {
      writer.addIndexes(parts);
      writer.commit();
      System.out.println("merged: " + writer.getDocStats().numDocs);
    } finally {
      for (Directory part : parts) {
        part.close();
      }
    }
  }
}
