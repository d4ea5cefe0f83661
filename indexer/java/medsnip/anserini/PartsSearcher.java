package medsnip.anserini;

import io.anserini.search.SimpleSearcher;
import java.io.IOException;
import java.nio.file.Paths;
import org.apache.lucene.index.DirectoryReader;
import org.apache.lucene.index.IndexReader;
import org.apache.lucene.index.MultiReader;
import org.apache.lucene.store.FSDirectory;

/**
 * Anserini's SimpleSearcher over several Lucene indexes read as one (a MultiReader), for BM25 indexes
 * built per group of shards and kept apart instead of merged. Everything but the reader is
 * SimpleSearcher's own (analyzer, query generation, BM25 similarity, ties broken by docid), and an
 * IndexSearcher over a MultiReader takes its statistics over all parts, so hits and scores equal those
 * of one index holding every document.
 */
public final class PartsSearcher extends SimpleSearcher {
  public PartsSearcher(String[] parts) throws IOException {
    super(parts[0]);
    IndexReader[] readers = new IndexReader[parts.length];
    readers[0] = this.reader;
    try {
      for (int i = 1; i < parts.length; i++) {
        readers[i] = DirectoryReader.open(FSDirectory.open(Paths.get(parts[i])));
      }
    } catch (IOException error) {
      for (IndexReader opened : readers) {
        if (opened != null) {
          opened.close();
        }
      }
      throw error;
    }
    this.reader = new MultiReader(readers, true); // closing it closes every part
    this.searcher = null; // SimpleSearcher builds its IndexSearcher over `reader` on first use
  }
}
