package io.indexeddf.spark.plan;

import java.util.List;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.catalog.CatalogTable;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The catalog entry {@code writeStream.format("indexeddf").toTable(name)} makes for a name that
 * does not exist yet: provider {@code indexeddf} and a location, and no log yet. Spark's
 * {@code toTable} runs a {@code CREATE TABLE} of the stream's columns before it starts the
 * query, but hands it none of the stream's options (its {@code OptionList} is empty), so the
 * index columns and bucket count ({@code indexColumns},
 * {@code numBuckets}) are not known here. The table's first commit is the sink's: it creates the
 * table at the entry's location with the stream's schema and those options on the first
 * micro-batch (as {@code writeStream.start(path)} does), then appends. Until then the entry
 * reads as a table that does not exist ({@code TableNotFoundError}); {@code IndexedDFCatalog}
 * hands it to Spark as the plain entry, which is what {@code toTable} starts the sink from.
 */
public final class StreamTableEntry extends JavaCommand {
    private static final long serialVersionUID = 1L;

    private final CatalogTable entry;

    /** Registers {@code entry} (its schema is dropped: the table's log will hold it). */
    public StreamTableEntry(CatalogTable entry) {
        super(List.of());
        this.entry = entry;
    }

    /**
     * Whether the statement being analysed is the {@code CREATE TABLE} that Spark's
     * {@code DataStreamWriter.toTable} runs (its frame is on this thread's stack: the statement
     * is analysed and run inside that call).
     */
    public static boolean fromStreamToTable() {
        return StackWalker.getInstance().walk(frames -> frames.anyMatch(f -> "toTable".equals(f.getMethodName())
            && f.getClassName().endsWith(".DataStreamWriter")));
    }

    @Override
    public Seq<Row> run(SparkSession session) {
        session.sessionState().catalog().createTable(entry, false, true);
        return CollectionConverters.asScala(List.<Row>of()).toList();
    }

    @Override
    Object[] arguments() {
        return new Object[] {entry};
    }
}
