package medsnip.anserini;

import io.anserini.analysis.AnalyzerMap;
import io.anserini.analysis.DefaultEnglishAnalyzer;
import io.anserini.collection.FileSegment;
import io.anserini.collection.JsonCollection;
import io.anserini.index.IndexCollection;
import io.anserini.index.generator.DefaultLuceneDocumentGenerator;
import java.io.BufferedReader;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import org.apache.lucene.analysis.Analyzer;
import org.apache.lucene.index.IndexWriter;
import org.apache.lucene.index.IndexWriterConfig;
import org.apache.lucene.index.Term;
import org.apache.lucene.index.TieredMergePolicy;
import org.apache.lucene.search.similarities.BM25Similarity;
import org.apache.lucene.store.Directory;
import org.apache.lucene.store.FSDirectory;

/**
 * Applies a corpus change set to a Lucene index that IndexCollection built: the ids in DELETES are
 * deleted, the JSON lines in ADDS are analyzed and added by Anserini's own JsonCollection and
 * DefaultLuceneDocumentGenerator (with IndexCollection's analyzer for LANGUAGE and medsnip's index flags,
 * positions and doc vectors), so each added document is the one a full IndexCollection run would write.
 *
 * <p>Lucene keeps a deleted document in its segment's statistics (document count, document and term
 * frequencies) until a merge drops it. medsnip reads updated indexes through LiveSearcher, which
 * subtracts what the deleted documents add, so hits and scores equal a full rebuild's whatever deletions
 * the segments hold (Anserini breaks score ties by the id field, not by Lucene's document order).
 * When the deletions held exceed COMPACT_ABOVE, the segments holding them are merged away before the
 * commit (forceMergeDeletes with no deletion percentage allowed): that rewrites most of the index, but leaves
 * one that scores like a fresh build in any Lucene reader (plain pyserini too). COMPACT_ABOVE is the
 * share of deleted documents the segments may hold after the update: 0 always compacts, 1 never does.
 * Ids are unique in a corpus, so an added id is first deleted (updateDocument), which makes a rerun
 * after a kill before the commit apply the same set again with the same result.
 *
 * <p>Usage: UpdateIndex INDEX DELETES ADDS LANGUAGE COMPACT_ABOVE; DELETES holds one id per line,
 * ADDS is a JsonCollection file (either may be empty). Prints the counts.
 */
public final class UpdateIndex {
  private UpdateIndex() {}

  static Analyzer analyzer(String language) throws IOException {
    if (language.equals("en")) {
      IndexCollection.Args defaults = new IndexCollection.Args(); // IndexCollection's stemmer and stopwords
      return DefaultEnglishAnalyzer.fromArguments(defaults.stemmer, defaults.keepStopwords, defaults.stopwords);
    }
    if (!AnalyzerMap.analyzerMap.containsKey(language)) {
      throw new IllegalArgumentException("Anserini has no analyzer for " + language);
    }
    return AnalyzerMap.getLanguageSpecificAnalyzer(language);
  }

  public static void main(String[] args) throws Exception {
    if (args.length != 5) {
      System.err.println("usage: UpdateIndex INDEX DELETES ADDS LANGUAGE COMPACT_ABOVE");
      System.exit(2);
    }
    Path deletes = Paths.get(args[1]);
    Path adds = Paths.get(args[2]);
    IndexCollection.Args generatorArgs = new IndexCollection.Args();
    generatorArgs.storePositions = true; // medsnip's INDEX_FLAGS (indexer/anserini_index.py)
    generatorArgs.storeDocvectors = true;
    DefaultLuceneDocumentGenerator<JsonCollection.Document> generator =
        new DefaultLuceneDocumentGenerator<>(generatorArgs);

    IndexWriterConfig config = new IndexWriterConfig(analyzer(args[3]));
    config.setSimilarity(new BM25Similarity());
    config.setOpenMode(IndexWriterConfig.OpenMode.APPEND);
    config.setUseCompoundFile(false);
    TieredMergePolicy mergePolicy = new TieredMergePolicy();
    mergePolicy.setForceMergeDeletesPctAllowed(0.0);
    config.setMergePolicy(mergePolicy);

    long deleted = 0;
    long added = 0;
    try (Directory directory = FSDirectory.open(Paths.get(args[0]));
        IndexWriter writer = new IndexWriter(directory, config)) {
      try (BufferedReader reader = Files.newBufferedReader(deletes, StandardCharsets.UTF_8)) {
        String id;
        while ((id = reader.readLine()) != null) {
          if (!id.isEmpty()) {
            writer.deleteDocuments(new Term("id", id));
            deleted++;
          }
        }
      }
      if (Files.size(adds) > 0) {
        JsonCollection collection = new JsonCollection(adds.getParent());
        try (FileSegment<JsonCollection.Document> segment = collection.createFileSegment(adds)) {
          for (JsonCollection.Document document : segment) {
            writer.updateDocument(new Term("id", document.id()), generator.createDocument(document));
            added++;
          }
          if (segment.getErrorStatus()) {
            throw new IOException(adds + ": Anserini could not read every document");
          }
        }
      }
      writer.commit(); // deletions are counted once applied
      double compactAbove = Double.parseDouble(args[4]);
      IndexWriter.DocStats stats = writer.getDocStats();
      boolean compact = stats.maxDoc > 0 && (stats.maxDoc - stats.numDocs) > compactAbove * stats.maxDoc;
      if (compact) {
        writer.forceMergeDeletes(true);
        writer.commit();
      }
      System.out.println("compacted: " + compact);
      System.out.println("delete_terms: " + deleted);
      System.out.println("added: " + added);
      System.out.println("documents: " + writer.getDocStats().numDocs);
      System.out.println("deleted_held: " + (writer.getDocStats().maxDoc - writer.getDocStats().numDocs));
    }
  }
}
