package medsnip.anserini;

import java.io.IOException;
import java.util.HashMap;
import java.util.Map;
import org.apache.lucene.index.Fields;
import org.apache.lucene.index.FilterLeafReader;
import org.apache.lucene.index.LeafReader;
import org.apache.lucene.index.TermState;
import org.apache.lucene.index.TermVectors;
import org.apache.lucene.index.Terms;
import org.apache.lucene.index.TermsEnum;
import org.apache.lucene.util.Bits;
import org.apache.lucene.util.BytesRef;

/**
 * A segment reader whose term statistics count live documents only.
 *
 * <p>Lucene keeps a deleted document in its segment's statistics (a field's document count and sums,
 * a term's document and total frequency) until a merge drops it, so BM25 over an index updated in place
 * (UpdateIndex) would score with other numbers than a fresh build of the same documents. Every deleted
 * document's term vector (IndexCollection's -storeDocvectors, which medsnip always sets) says exactly
 * what it added to those statistics; this reader subtracts it, once, when the segment is opened. The
 * postings, norms and stored fields are the segment's own, so with the statistics equal the BM25 score
 * of every live document equals a fresh build's. A term whose every document in the segment is deleted
 * is absent from it, as it would be in a fresh build. The correction costs one term vector read per
 * deleted document at open time and a hash lookup per query term per segment at search time; segments
 * without deletions are not wrapped.
 */
final class LiveStatistics extends FilterLeafReader {
  /** What the deleted documents of one field add to its statistics. */
  private static final class FieldCorrection {
    int docCount;
    long sumTotalTermFreq;
    long sumDocFreq;
    final Map<BytesRef, long[]> terms = new HashMap<>(); // term -> {docFreq, totalTermFreq}
  }

  private final Map<String, FieldCorrection> corrections;

  private LiveStatistics(LeafReader in, Map<String, FieldCorrection> corrections) {
    super(in);
    this.corrections = corrections;
  }

  /** `leaf` itself when it has no deletions, else the leaf with its statistics corrected. */
  static LeafReader wrap(LeafReader leaf) throws IOException {
    Bits live = leaf.getLiveDocs();
    if (live == null) {
      return leaf;
    }
    Map<String, FieldCorrection> corrections = new HashMap<>();
    TermVectors vectors = leaf.termVectors();
    for (int doc = 0; doc < leaf.maxDoc(); doc++) {
      if (live.get(doc)) {
        continue;
      }
      Fields fields = vectors.get(doc);
      if (fields == null) {
        continue; // a document with no indexed terms counts in no statistic
      }
      for (String field : fields) {
        Terms terms = fields.terms(field);
        if (terms == null) {
          continue;
        }
        FieldCorrection correction = corrections.computeIfAbsent(field, name -> new FieldCorrection());
        correction.docCount++;
        TermsEnum termsEnum = terms.iterator();
        for (BytesRef term = termsEnum.next(); term != null; term = termsEnum.next()) {
          long frequency = termsEnum.totalTermFreq(); // in a term vector: the term's count in this document
          long[] counts = correction.terms.computeIfAbsent(BytesRef.deepCopyOf(term), key -> new long[2]);
          counts[0]++;
          counts[1] += frequency;
          correction.sumDocFreq++;
          correction.sumTotalTermFreq += frequency;
        }
      }
    }
    return new LiveStatistics(leaf, corrections);
  }

  @Override
  public Terms terms(String field) throws IOException {
    Terms terms = in.terms(field);
    FieldCorrection correction = corrections.get(field);
    if (terms == null || correction == null) {
      return terms;
    }
    return new FilterTerms(terms) {
      @Override
      public int getDocCount() throws IOException {
        return in.getDocCount() - correction.docCount;
      }

      @Override
      public long getSumTotalTermFreq() throws IOException {
        return in.getSumTotalTermFreq() - correction.sumTotalTermFreq;
      }

      @Override
      public long getSumDocFreq() throws IOException {
        return in.getSumDocFreq() - correction.sumDocFreq;
      }

      @Override
      public TermsEnum iterator() throws IOException {
        return new LiveTermsEnum(in.iterator(), correction.terms);
      }
    };
  }

  /** A terms enum whose docFreq and totalTermFreq leave the deleted documents out. */
  private static final class LiveTermsEnum extends FilterTermsEnum {
    private final Map<BytesRef, long[]> deleted;

    LiveTermsEnum(TermsEnum in, Map<BytesRef, long[]> deleted) {
      super(in);
      this.deleted = deleted;
    }

    private long[] deletedCounts() throws IOException {
      return deleted.get(in.term());
    }

    @Override
    public boolean seekExact(BytesRef text) throws IOException {
      if (!in.seekExact(text)) {
        return false;
      }
      long[] counts = deleted.get(text);
      return counts == null || in.docFreq() > counts[0]; // only deleted documents hold it: not a term here
    }

    @Override
    public void seekExact(BytesRef term, TermState state) throws IOException {
      in.seekExact(term, state);
    }

    @Override
    public int docFreq() throws IOException {
      long[] counts = deletedCounts();
      return counts == null ? in.docFreq() : in.docFreq() - (int) counts[0];
    }

    @Override
    public long totalTermFreq() throws IOException {
      long[] counts = deletedCounts();
      return counts == null ? in.totalTermFreq() : in.totalTermFreq() - counts[1];
    }
  }

  @Override
  protected void doClose() {
    // the segment belongs to the DirectoryReader it came from, which LiveSearcher closes
  }

  @Override
  public CacheHelper getCoreCacheHelper() {
    return null; // the statistics differ from the segment's own: never share cached entries with it
  }

  @Override
  public CacheHelper getReaderCacheHelper() {
    return null;
  }
}
