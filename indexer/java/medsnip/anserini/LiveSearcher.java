package medsnip.anserini;

import java.io.IOException;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import org.apache.lucene.index.DirectoryReader;
import org.apache.lucene.index.IndexReader;
import org.apache.lucene.index.LeafReader;
import org.apache.lucene.index.LeafReaderContext;
import org.apache.lucene.index.MultiReader;
import org.apache.lucene.store.FSDirectory;

/**
 * FlatSearcher (Anserini's SimpleSearcher) over one or more Lucene indexes read as one, with statistics over live
 * documents only: BM25 indexes built per group of shards and kept apart (layout "parts"), and indexes
 * updated in place by UpdateIndex, whose deleted documents Lucene still counts (LiveStatistics).
 *
 * <p>Everything but the reader is SimpleSearcher's own (analyzer, query generation, BM25 similarity,
 * ties broken by docid). An IndexSearcher over a MultiReader takes its statistics over all segments of
 * all parts, and each segment with deletions reports its live documents' statistics, so hits and scores
 * equal those of one freshly built index holding the live documents.
 */
public final class LiveSearcher extends FlatSearcher {
  private final List<DirectoryReader> directories = new ArrayList<>();

  public LiveSearcher(String[] indexes) throws IOException {
    super(indexes[0]);
    directories.add((DirectoryReader) this.reader);
    List<IndexReader> leaves = new ArrayList<>();
    try {
      for (int i = 1; i < indexes.length; i++) {
        directories.add(DirectoryReader.open(FSDirectory.open(Paths.get(indexes[i]))));
      }
      for (DirectoryReader directory : directories) {
        for (LeafReaderContext leaf : directory.leaves()) {
          leaves.add(LiveStatistics.wrap(leaf.reader()));
        }
      }
    } catch (IOException error) {
      closeDirectories();
      throw error;
    }
    // the leaves belong to their DirectoryReaders (closed in close()), so the MultiReader does not close them
    this.reader = new MultiReader(leaves.toArray(new LeafReader[0]), false);
    this.searcher = null; // SimpleSearcher builds its IndexSearcher over `reader` on first use
  }

  /** Live documents (SimpleSearcher counts Lucene's maxDoc, which includes deleted ones). */
  @Override
  public int get_total_num_docs() {
    return reader.numDocs();
  }

  /** Documents deleted but still held in segments (what LiveStatistics corrects for). */
  public int deleted_docs() {
    int deleted = 0;
    for (DirectoryReader directory : directories) {
      deleted += directory.numDeletedDocs();
    }
    return deleted;
  }

  private void closeDirectories() throws IOException {
    IOException first = null;
    for (DirectoryReader directory : directories) {
      try {
        directory.close();
      } catch (IOException error) {
        first = first == null ? error : first;
      }
    }
    if (first != null) {
      throw first;
    }
  }

  @Override
  public void close() throws IOException {
    try {
      super.close();
    } finally {
      closeDirectories();
    }
  }
}
