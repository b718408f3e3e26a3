package io.indexeddf.spark.plan;

import io.indexeddf.log.DeltaLog;
import io.indexeddf.log.IndexedDFException;
import io.indexeddf.spark.exec.TableRelation;
import java.util.List;

import org.apache.hadoop.conf.Configuration;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.TableIdentifier;
import org.apache.spark.sql.catalyst.catalog.CatalogTable;
import scala.Option;

/**
 * The table a Delta statement ({@code DESCRIBE HISTORY}, {@code DESCRIBE DETAIL},
 * {@code OPTIMIZE}, {@code VACUUM}, {@code RESTORE}) names, as Delta's statements name one: a
 * catalog entry ({@code t}, {@code db.t}, {@code spark_catalog.db.t}) whose provider is
 * indexeddf, the path identifier {@code indexeddf.`/path`}, or a path in quotes
 * ({@code '/path'}). Resolved when the statement runs: the location and storage options the
 * Python writer takes, and the log the JVM reads.
 */
public final class SqlTable {
    /** The location as the Python writer takes it (local tables as plain paths, others as URLs). */
    public final String path;
    /** The entry's {@code storageOptions} option, or null. */
    public final String storageOptions;
    /** The entry, or null for a table named by its path. */
    public final CatalogTable entry;
    /** The name as results show it: the entry's qualified name, or null for a path. */
    public final String qualifiedName;

    private SqlTable(String path, String storageOptions, CatalogTable entry) {
        this.path = path;
        this.storageOptions = storageOptions;
        this.entry = entry;
        this.qualifiedName = entry == null ? null : entry.qualifiedName();
    }

    /**
     * The table a statement names by {@code path} (a quoted path, or null) or by
     * {@code name} (its parts); {@code what} names the statement in errors.
     */
    public static SqlTable resolve(SparkSession session, String path, List<String> name, String what) {
        if (path != null) {
            return new SqlTable(path, null, null);
        }
        if (name.size() == 2 && TableRelation.NAME.equalsIgnoreCase(name.get(0))) {
            return new SqlTable(name.get(1), null, null);
        }
        TableIdentifier ident;
        if (name.size() == 1) {
            ident = new TableIdentifier(name.get(0));
        } else if (name.size() == 2) {
            ident = new TableIdentifier(name.get(1), Option.apply(name.get(0)));
        } else if (name.size() == 3
                && name.get(0).equalsIgnoreCase(org.apache.spark.sql.connector.catalog.CatalogManager
                    .SESSION_CATALOG_NAME())) {
            ident = new TableIdentifier(name.get(2), Option.apply(name.get(1)));
        } else {
            throw new IndexedDFException("TableNotFoundError", what + ": " + String.join(".", name)
                + " is not a table of the session catalog; name an indexeddf table as t, db.t or "
                + TableRelation.NAME + ".`/path`");
        }
        CatalogTable entry;
        try {
            entry = session.sessionState().catalog().getTableMetadata(ident);
        } catch (org.apache.spark.sql.AnalysisException e) {
            throw new IndexedDFException("TableNotFoundError", what + ": no table " + ident.unquotedString()
                + " in the catalog; create it with CREATE TABLE " + ident.unquotedString() + " USING "
                + TableRelation.NAME + " LOCATION '<path>', or name the table by its path: " + TableRelation.NAME
                + ".`/path`");
        }
        if (!TableRelation.isProvider(entry.provider())) {
            throw new IndexedDFException("TableNotFoundError", what + ": " + ident.unquotedString()
                + " is not an indexeddf table (its provider is " + (entry.provider().isDefined()
                    ? entry.provider().get() : "none") + "); this statement works on tables created USING "
                + TableRelation.NAME);
        }
        return new SqlTable(CatalogTables.location(entry, what), CatalogTables.storageOptions(entry), entry);
    }

    /** The table's log (listed now). */
    public DeltaLog log(SparkSession session) {
        Configuration conf = session.sessionState().newHadoopConf();
        return DeltaLog.open(TableRelation.tableRoot(path, conf), conf);
    }

    /** Drops Spark's cached relation of the entry after a statement changed the table. */
    void invalidate(SparkSession session) {
        if (entry != null) {
            session.sessionState().catalog().invalidateCachedTable(entry.identifier());
        }
    }
}
