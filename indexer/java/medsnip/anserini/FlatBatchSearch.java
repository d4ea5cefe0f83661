package medsnip.anserini;

import io.anserini.search.ScoredDoc;
import java.util.List;
import java.util.Map;

/**
 * A batch's hits handed to Python as three flat values.
 *
 * <p>pyserini returns every hit as a Java object that pyjnius wraps one by one (about 10 microseconds
 * each, with the GIL held): with a depth of 100 over several corpora that wrapping cost more than the
 * search itself. Here a batch's hits come back as one string of docids, one int array of counts and one
 * float array of scores: three JNI conversions per batch. FlatSearcher.batch_flat makes them.
 *
 * <p>Built by `make java` into indexer/java/medsnip-anserini.jar, which is checked in.
 */
public final class FlatBatchSearch {
  /** Every hit's docid, query after query, best first, separated by '\n'. */
  public final String docids;
  /** Hits per query, in the order of the queries. */
  public final int[] counts;
  /** Every hit's score, in the order of docids. */
  public final float[] scores;

  private FlatBatchSearch(String docids, int[] counts, float[] scores) {
    this.docids = docids;
    this.counts = counts;
    this.scores = scores;
  }

  /** Hits per query as ids and scores, best first. */
  static FlatBatchSearch of(String[][] ids, float[][] scores) {
    int[] counts = new int[ids.length];
    int total = 0;
    for (int q = 0; q < ids.length; q++) {
      counts[q] = ids[q].length;
      total += counts[q];
    }
    StringBuilder docids = new StringBuilder(total * 24);
    float[] flatScores = new float[total];
    int at = 0;
    for (int q = 0; q < ids.length; q++) {
      for (int i = 0; i < counts[q]; i++) {
        if (at > 0) {
          docids.append('\n');
        }
        docids.append(ids[q][i]);
        flatScores[at++] = scores[q][i];
      }
    }
    return new FlatBatchSearch(docids.toString(), counts, flatScores);
  }

  /** Anserini's batch_search results, read in the order of `qids`. */
  static FlatBatchSearch of(Map<String, ScoredDoc[]> results, List<String> qids) {
    String[][] ids = new String[qids.size()][];
    float[][] scores = new float[qids.size()][];
    for (int q = 0; q < ids.length; q++) {
      ScoredDoc[] hits = results.get(qids.get(q));
      hits = hits == null ? new ScoredDoc[0] : hits;
      ids[q] = new String[hits.length];
      scores[q] = new float[hits.length];
      for (int i = 0; i < hits.length; i++) {
        ids[q][i] = hits[i].docid;
        scores[q][i] = hits[i].score;
      }
    }
    return of(ids, scores);
  }
}
