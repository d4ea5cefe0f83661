package medsnip.anserini;

import io.anserini.search.ScoredDoc;
import io.anserini.search.SimpleSearcher;
import java.util.List;
import java.util.Map;

/**
 * Anserini's batch_search, with its hits handed to Python as three flat values.
 *
 * <p>pyserini returns every hit as a Java object that pyjnius wraps one by one (about 10 microseconds
 * each, with the GIL held): with a depth of 100 over several corpora that wrapping cost more than the
 * search itself. Here the same SimpleSearcher.batch_search runs and its hits come back as one string
 * of docids, one int array of counts and one float array of scores: three JNI conversions per batch.
 *
 * <p>Built by `make java` into indexer/java/medsnip-anserini.jar, which is checked in.
 */
public final class FlatBatchSearch {
  /** Every hit's docid, query after query, best first, separated by '\n'. */
  public final String docids;
  /** Hits per query, in the order of the qids given. */
  public final int[] counts;
  /** Every hit's score, in the order of docids. */
  public final float[] scores;

  private FlatBatchSearch(String docids, int[] counts, float[] scores) {
    this.docids = docids;
    this.counts = counts;
    this.scores = scores;
  }

  public static FlatBatchSearch run(
      SimpleSearcher searcher, List<String> queries, List<String> qids, int k, int threads) {
    Map<String, ScoredDoc[]> results = searcher.batch_search(queries, qids, k, threads);
    int[] counts = new int[qids.size()];
    int total = 0;
    for (int q = 0; q < counts.length; q++) {
      ScoredDoc[] hits = results.get(qids.get(q));
      counts[q] = hits == null ? 0 : hits.length;
      total += counts[q];
    }
    StringBuilder docids = new StringBuilder(total * 24);
    float[] scores = new float[total];
    int at = 0;
    for (int q = 0; q < counts.length; q++) {
      if (counts[q] == 0) {
        continue;
      }
      for (ScoredDoc hit : results.get(qids.get(q))) {
        if (at > 0) {
          docids.append('\n');
        }
        docids.append(hit.docid);
        scores[at++] = hit.score;
      }
    }
    return new FlatBatchSearch(docids.toString(), counts, scores);
  }
}
