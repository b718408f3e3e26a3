package io.indexeddf.spark.plan;

import java.util.List;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.catalog.CatalogTable;
import org.apache.spark.sql.types.StructType;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The catalog entry {@code writeStream.format("indexeddf").toTable(name)} makes for a name that
 * does not exist yet. Spark's {@code toTable} runs a {@code CREATE TABLE} of the stream's columns
 * before it starts the query, but hands it none of the stream's options (its {@code OptionList}
 * is empty), so the index columns and bucket count ({@code indexColumns}, {@code numBuckets}) are
 * not known here: this command registers the entry (provider {@code indexeddf} and a location)
 * and keeps the stream's schema for that location ({@link #takePending}). The provider's
 * {@code createSink}, which {@code toTable} calls next with the stream's options, then creates
 * the table at the entry's location, empty, with that schema and those options (Delta's
 * {@code toTable} commits an empty version 0 too), and the micro-batches append.
 */
public final class StreamTableEntry extends JavaCommand {
    private static final long serialVersionUID = 1L;

    /** The stream schemas of entries registered and not created yet, by location. */
    private static final java.util.concurrent.ConcurrentHashMap<String, StructType> PENDING =
        new java.util.concurrent.ConcurrentHashMap<>();

    private final CatalogTable entry;
    private final StructType schema;

    /** Registers {@code entry} (without a schema: the table's log will hold it) for a stream of {@code schema}. */
    public StreamTableEntry(CatalogTable entry, StructType schema) {
        super(List.of());
        this.entry = entry;
        this.schema = schema;
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

    /**
     * The stream schema of the entry registered at {@code location} and not created yet, or
     * null; taken (a second call is null) unless {@link #putBack} returns it.
     */
    public static StructType takePending(String location) {
        return location == null ? null : PENDING.remove(key(location));
    }

    /** Keeps {@code schema} pending at {@code location} again (its creation failed). */
    public static void putBack(String location, StructType schema) {
        PENDING.put(key(location), schema);
    }

    /** {@code location} as one string whether it names an empty authority or none ({@code file:///t}, {@code file:/t}). */
    private static String key(String location) {
        java.net.URI u = new org.apache.hadoop.fs.Path(location).toUri().normalize();
        String authority = u.getAuthority() == null || u.getAuthority().isEmpty() ? "" : "//" + u.getAuthority();
        return (u.getScheme() == null ? "" : u.getScheme() + ":") + authority + u.getPath();
    }

    @Override
    public Seq<Row> run(SparkSession session) {
        org.apache.spark.sql.catalyst.catalog.SessionCatalog catalog = session.sessionState().catalog();
        catalog.createTable(entry, false, true);
        java.net.URI location;
        try {
            location = catalog.getTableMetadata(entry.identifier()).location();
        } catch (Exception e) {  // the entry just made: Spark's checked "no such table" cannot happen
            throw new IllegalStateException(e);
        }
        PENDING.put(key(location.toString()), schema);
        return CollectionConverters.asScala(List.<Row>of()).toList();
    }

    @Override
    Object[] arguments() {
        return new Object[] {entry, schema};
    }
}
