package io.indexeddf.spark;

import io.indexeddf.log.IndexedDFException;
import io.indexeddf.spark.exec.TableRelation;
import io.indexeddf.spark.plan.IndexedDFTable;

import org.apache.spark.sql.AnalysisException;
import org.apache.spark.sql.catalyst.analysis.NoSuchTableException;
import org.apache.spark.sql.catalyst.catalog.CatalogTable;
import org.apache.spark.sql.connector.catalog.DelegatingCatalogExtension;
import org.apache.spark.sql.connector.catalog.Identifier;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableChange;
import org.apache.spark.sql.connector.catalog.V1Table;

/**
 * The session catalog with indexeddf tables read from their logs, as delta-spark's
 * {@code DeltaCatalog}: {@code indexeddf.configure(builder)} sets
 * {@code spark.sql.catalog.spark_catalog} to it. A {@code DelegatingCatalogExtension}: every
 * table of another provider, and every statement on one, is the session catalog's, untouched.
 *
 * <p>{@link #loadTable(Identifier)} of an entry with provider {@code indexeddf}, and of
 * {@code indexeddf.`/path`} (which no catalog holds), is an {@link IndexedDFTable}: schema,
 * partitioning and properties replayed from the table's log at that load. Time travel is
 * Spark's own: {@code VERSION AS OF n} and {@code TIMESTAMP AS OF t} (and the read options
 * {@code versionAsOf} / {@code timestampAsOf} of {@code spark.read.table}) come to
 * {@link #loadTable(Identifier, String)} and {@link #loadTable(Identifier, long)}; Delta's
 * suffixes {@code `name@v3`} and {@code `name@yyyyMMddHHmmssSSS`} are read here. An entry whose
 * location holds no log (one {@code writeStream.toTable(name)} registered for a stream that was
 * refused before it created the table) is the session catalog's plain entry.
 */
public class IndexedDFCatalog extends DelegatingCatalogExtension implements IndexedDFTable.PathCatalog {
    @Override
    public Table loadTable(Identifier ident) throws NoSuchTableException {
        Table table;
        try {
            table = super.loadTable(ident);
        } catch (AnalysisException e) {  // no such table or namespace
            if (isPath(ident)) {
                IndexedDFTable path = IndexedDFTable.ofPath(IndexedDFTable.withoutTimeTravelSuffix(ident.name()));
                return path.atSuffix(ident.name());
            }
            if (IndexedDFTable.hasTimeTravelSuffix(ident.name())) {
                Identifier base = Identifier.of(ident.namespace(),
                    IndexedDFTable.withoutTimeTravelSuffix(ident.name()));
                Table named;
                try {
                    named = super.loadTable(base);
                } catch (AnalysisException ignored) {
                    throw e;
                }
                if (named instanceof V1Table && TableRelation.isProvider(((V1Table) named).v1Table().provider())) {
                    return IndexedDFTable.ofEntry(((V1Table) named).v1Table()).atSuffix(ident.name());
                }
            }
            throw e;
        }
        if (table instanceof V1Table) {
            CatalogTable entry = ((V1Table) table).v1Table();
            if (TableRelation.isProvider(entry.provider())) {
                try {
                    return IndexedDFTable.ofEntry(entry);
                } catch (IndexedDFException e) {
                    if (!"TableNotFoundError".equals(e.errorName)) {
                        throw e;
                    }
                    // No log at the entry's location (writeStream.toTable registered it, and the
                    // stream was refused before it created the table): the plain entry, which a
                    // later toTable streams into through the provider's sink; reads say no table.
                    return table;
                }
            }
        }
        return table;
    }

    /** {@code VERSION AS OF version}: an indexeddf table at that version; others as the session catalog has them. */
    @Override
    public Table loadTable(Identifier ident, String version) throws NoSuchTableException {
        Table table = loadTable(ident);
        if (!(table instanceof IndexedDFTable)) {
            return super.loadTable(ident, version);
        }
        long v;
        try {
            v = Long.parseLong(version.trim());
        } catch (NumberFormatException e) {
            throw IndexedDFException.option("VERSION AS OF of " + table.name() + " must be a version number, got '"
                + version + "'");
        }
        return ((IndexedDFTable) table).at(v, null);
    }

    /**
     * {@code TIMESTAMP AS OF t} ({@code timestamp}: microseconds since the epoch, as Spark
     * evaluated it): an indexeddf table at the newest version committed at or before it.
     */
    @Override
    public Table loadTable(Identifier ident, long timestamp) throws NoSuchTableException {
        Table table = loadTable(ident);
        if (!(table instanceof IndexedDFTable)) {
            return super.loadTable(ident, timestamp);
        }
        String at = java.time.Instant.EPOCH.plus(timestamp, java.time.temporal.ChronoUnit.MICROS).toString();
        return ((IndexedDFTable) table).at(null, at);
    }

    /**
     * Changes to an indexeddf table's entry are refused: its log holds its schema and
     * properties. The statements that change them ({@code ALTER TABLE ... SET / UNSET
     * TBLPROPERTIES}, {@code ADD COLUMNS}, {@code COMMENT ON TABLE}, {@code RENAME COLUMN},
     * {@code DROP COLUMNS}) commit to the log ({@code CatalogTables.TableProperties},
     * {@code ColumnChanges}) and never come here; any other would change the entry alone.
     * Other tables' changes are the session catalog's.
     */
    @Override
    public Table alterTable(Identifier ident, TableChange... changes) throws NoSuchTableException {
        Table table = loadTable(ident);
        if (table instanceof IndexedDFTable) {
            StringBuilder what = new StringBuilder();
            for (TableChange c : changes) {
                what.append(what.length() == 0 ? "" : ", ").append(c.getClass().getSimpleName());
            }
            throw IndexedDFException.option("ALTER TABLE " + table.name() + " (" + what + ") is not supported on "
                + "indexeddf tables: the table's log holds its schema; ALTER TABLE ... ADD COLUMNS, RENAME COLUMN, DROP "
                + "COLUMNS and SET / UNSET TBLPROPERTIES commit to it, other schema changes are not supported");
        }
        return super.alterTable(ident, changes);
    }

    /** Whether {@code ident} is {@code indexeddf.`/path`}. */
    static boolean isPath(Identifier ident) {
        return ident.namespace().length == 1 && TableRelation.NAME.equalsIgnoreCase(ident.namespace()[0]);
    }
}
