package medsnip.anserini;

import io.anserini.index.Constants;
import io.anserini.search.SimpleSearcher;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.lucene.search.FieldDoc;
import org.apache.lucene.search.IndexSearcher;
import org.apache.lucene.search.Query;
import org.apache.lucene.search.ScoreDoc;
import org.apache.lucene.search.Sort;
import org.apache.lucene.search.SortField;
import org.apache.lucene.search.TopFieldDocs;
import org.apache.lucene.util.BytesRef;

/**
 * Anserini's SimpleSearcher with a batch search that returns the same hits and scores without loading
 * each hit's stored document.
 *
 * <p>SimpleSearcher.search loads every hit's whole stored document (to read its id) before it breaks
 * score ties: at a fusion depth of 100 that is a stored-fields block decompressed per hit, about 1 ms of
 * a query's 1.3 ms on a 21k-snippet index. Here each query runs exactly as SimpleSearcher runs it (its
 * query generator and analyzer, its similarity, sorted by score then by the id's doc values, which is
 * SimpleSearcher's own sort), the id is read from that sort's value (the id's doc values, written beside
 * the stored id by Anserini's document generator), and the scores get SimpleSearcher's tie adjustment:
 * rounded to 1e-4, each further tie lowered by 1e-6. Where SimpleSearcher would rerank (RM3, Rocchio)
 * or keep Lucene 8's tie order, its own batch_search runs instead.
 */
public class FlatSearcher extends SimpleSearcher {
  private static final Sort SCORE_THEN_ID =
      new Sort(SortField.FIELD_SCORE, new SortField(Constants.ID, SortField.Type.STRING_VAL));

  public FlatSearcher(String indexDir) throws IOException {
    super(indexDir);
  }

  /** Top-k hits of each query, flattened; `threads` workers share the batch (one runs it inline). */
  public FlatBatchSearch batch_flat(List<String> queries, int k, int threads) throws IOException {
    if (useRM3 || useRocchio || backwardsCompatibilityLucene8) {
      List<String> qids = new ArrayList<>(queries.size());
      for (int q = 0; q < queries.size(); q++) {
        qids.add(Integer.toString(q));
      }
      return FlatBatchSearch.of(batch_search(queries, qids, k, threads), qids);
    }
    IndexSearcher indexSearcher = indexSearcher();
    String[][] ids = new String[queries.size()][];
    float[][] scores = new float[queries.size()][];
    AtomicInteger next = new AtomicInteger();
    AtomicReference<Throwable> failure = new AtomicReference<>();
    Runnable worker =
        () -> {
          for (int q = next.getAndIncrement(); q < ids.length; q = next.getAndIncrement()) {
            try {
              searchOne(indexSearcher, queries.get(q), k, q, ids, scores);
            } catch (Throwable error) {
              failure.compareAndSet(null, error);
              return;
            }
          }
        };
    int workers = Math.max(1, Math.min(threads, ids.length));
    List<Thread> started = new ArrayList<>(workers - 1);
    for (int w = 1; w < workers; w++) {
      Thread thread = new Thread(worker, "medsnip-bm25-" + w);
      thread.setDaemon(true);
      thread.start();
      started.add(thread);
    }
    worker.run();
    for (Thread thread : started) {
      try {
        thread.join();
      } catch (InterruptedException error) {
        Thread.currentThread().interrupt();
        throw new IOException("interrupted while BM25 worker threads searched", error);
      }
    }
    Throwable error = failure.get();
    if (error instanceof IOException io) {
      throw io;
    }
    if (error instanceof RuntimeException runtime) {
      throw runtime;
    }
    if (error != null) {
      throw new RuntimeException(error);
    }
    return FlatBatchSearch.of(ids, scores);
  }

  private synchronized IndexSearcher indexSearcher() {
    // SimpleSearcher builds its IndexSearcher lazily too; synchronized so that workers never build two
    if (searcher == null) {
      searcher = new IndexSearcher(reader);
      searcher.setSimilarity(similarity);
    }
    return searcher;
  }

  private void searchOne(
      IndexSearcher indexSearcher, String text, int k, int q, String[][] ids, float[][] scores)
      throws IOException {
    Query query = generator.buildQuery(Constants.CONTENTS, analyzer, text);
    TopFieldDocs found = indexSearcher.search(query, k, SCORE_THEN_ID, true);
    ScoreDoc[] hits = found.scoreDocs;
    String[] hitIds = new String[hits.length];
    float[] hitScores = new float[hits.length];
    int dup = 0;
    for (int i = 0; i < hits.length; i++) {
      FieldDoc hit = (FieldDoc) hits[i];
      BytesRef id = (BytesRef) hit.fields[1];
      hitIds[i] =
          id != null
              ? id.utf8ToString()
              : indexSearcher.storedFields().document(hit.doc, Set.of(Constants.ID)).get(Constants.ID);
      // ScoreTiesAdjusterReranker's arithmetic, step for step, so that the floats are the same
      hitScores[i] = (float) (Math.round(hit.score * 1e4d) / 1e4d);
      if (i == 0 || hitScores[i - 1] - hitScores[i] > 1e-4f) {
        dup = 0;
      } else {
        dup++;
        hitScores[i] -= 1e-6f * dup;
      }
    }
    ids[q] = hitIds;
    scores[q] = hitScores;
  }
}
