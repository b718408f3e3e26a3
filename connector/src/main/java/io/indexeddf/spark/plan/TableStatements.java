package io.indexeddf.spark.plan;

import io.indexeddf.log.AddFile;
import io.indexeddf.log.IndexedDFException;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.analysis.ResolvedTable;
import org.apache.spark.sql.catalyst.analysis.UnresolvedPartitionSpec;
import org.apache.spark.sql.catalyst.catalog.ExternalCatalogUtils;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.OverwritePartitionsDynamic;
import org.apache.spark.sql.catalyst.plans.logical.ShowPartitions;
import org.apache.spark.sql.catalyst.plans.logical.TruncateTable;
import org.apache.spark.sql.catalyst.rules.Rule;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Statements on a table {@code IndexedDFCatalog} loaded ({@link IndexedDFTable}) that Spark
 * would run only on a V1 table or one that manages its partitions: {@code TRUNCATE TABLE}
 * (Delta's {@code TRUNCATE} commit, run by the Python API through {@link TableOperationCommand}) and {@code SHOW PARTITIONS} ({@link Partitions}); and
 * {@code df.writeTo(name).overwritePartitions()} (Delta's dynamic partition overwrite,
 * {@link DynamicOverwrite}), which Spark would refuse for a V1 write.
 */
public final class TableStatements extends Rule<LogicalPlan> {
    private final SparkSession session;

    public TableStatements(SparkSession session) {
        this.session = session;
    }

    @Override
    public LogicalPlan apply(LogicalPlan plan) {
        if (plan instanceof OverwritePartitionsDynamic
                && V1Fallback.tableOf((LogicalPlan) ((OverwritePartitionsDynamic) plan).table()) != null) {
            OverwritePartitionsDynamic o = (OverwritePartitionsDynamic) plan;
            if (!o.query().resolved()) {
                return plan;
            }
            IndexedDFTable t = V1Fallback.tableOf((LogicalPlan) o.table());
            Map<String, String> options = new java.util.LinkedHashMap<>(CollectionConverters.asJava(o.writeOptions()));
            options.put("path", t.path());
            if (t.storageOptions() != null) {
                options.put("storageOptions", t.storageOptions());
            }
            options.put("_dynamicPartitionOverwrite", "true");
            return new DynamicOverwrite(options, o.query(), t.entry() == null ? null : t.entry().identifier());
        }
        if (plan instanceof TruncateTable && loaded(((TruncateTable) plan).table()) != null) {
            IndexedDFTable t = loaded(((TruncateTable) plan).table());
            if (t.entry() == null) {
                return TableOperationCommand.truncate(t.path(), null);
            }
            org.apache.spark.sql.catalyst.TableIdentifier id = t.entry().identifier();
            List<String> name = id.database().isDefined() ? List.of(id.database().get(), id.table())
                : List.of(id.table());
            return TableOperationCommand.truncate(null, name);
        }
        if (plan instanceof ShowPartitions && loaded(((ShowPartitions) plan).table()) != null) {
            ShowPartitions show = (ShowPartitions) plan;
            IndexedDFTable t = loaded(show.table());
            Map<String, String> spec = new java.util.LinkedHashMap<>();
            if (show.pattern().isDefined()) {
                if (!(show.pattern().get() instanceof UnresolvedPartitionSpec)) {
                    return plan;
                }
                spec.putAll(CollectionConverters.asJava(((UnresolvedPartitionSpec) show.pattern().get()).spec()));
            }
            return new Partitions(CollectionConverters.asJava(show.output()), partitions(t, spec));
        }
        return plan;
    }

    private static IndexedDFTable loaded(LogicalPlan table) {
        return table instanceof ResolvedTable && ((ResolvedTable) table).table() instanceof IndexedDFTable
            ? (IndexedDFTable) ((ResolvedTable) table).table() : null;
    }

    /**
     * The partitions of the table's version that hold a live file, as Spark names them
     * ({@code day=2024-01-01/kind=a}, escaped as in a path), sorted; only those whose values
     * are {@code spec}'s (a {@code PARTITION (...)} clause).
     */
    static List<String> partitions(IndexedDFTable t, Map<String, String> spec) {
        List<String> columns = t.snapshot().partitionColumns();
        if (columns.isEmpty()) {
            throw IndexedDFException.option("SHOW PARTITIONS " + t.name() + ": the table is not partitioned");
        }
        for (String k : spec.keySet()) {
            if (columns.stream().noneMatch(c -> c.equalsIgnoreCase(k))) {
                throw IndexedDFException.option("SHOW PARTITIONS " + t.name() + " PARTITION (" + k + " = ...): " + k
                    + " is not a partition column; the table's are " + String.join(", ", columns));
            }
        }
        // partitionValues name a column-mapped table's columns physically.
        org.apache.spark.sql.types.StructField[] fields = io.indexeddf.spark.exec.Partitions.schema(t.snapshot(),
            io.indexeddf.spark.exec.ColumnMapping.tableSchema(t.snapshot())).fields();
        TreeSet<String> out = new TreeSet<>();
        for (AddFile a : t.snapshot().files) {
            List<String> parts = new ArrayList<>();
            boolean keep = true;
            for (int i = 0; i < columns.size(); i++) {
                String c = columns.get(i);
                String value = a.partitionValues.get(io.indexeddf.spark.exec.ColumnMapping.physicalName(fields[i]));
                for (Map.Entry<String, String> e : spec.entrySet()) {
                    if (e.getKey().equalsIgnoreCase(c) && !java.util.Objects.equals(e.getValue(), value)) {
                        keep = false;
                    }
                }
                parts.add(ExternalCatalogUtils.escapePathName(c) + "="
                    + (value == null ? ExternalCatalogUtils.DEFAULT_PARTITION_NAME()
                        : ExternalCatalogUtils.escapePathName(value)));
            }
            if (keep) {
                out.add(String.join("/", parts));
            }
        }
        return new ArrayList<>(out);
    }

    /**
     * {@code df.writeTo(name).overwritePartitions()}: Delta's dynamic partition overwrite, one
     * commit of the Python writer that replaces the partitions the rows fall in (the whole table
     * when it is not partitioned, as Delta ignores the mode there). Spark plans no V1 write for
     * it, so this command writes the query itself.
     */
    public static final class DynamicOverwrite extends JavaCommand {
        private static final long serialVersionUID = 1L;
        private final Map<String, String> options;
        private final LogicalPlan query;
        private final org.apache.spark.sql.catalyst.TableIdentifier entry;

        public DynamicOverwrite(Map<String, String> options, LogicalPlan query,
                                org.apache.spark.sql.catalyst.TableIdentifier entry) {
            super(List.of());
            this.options = options;
            this.query = query;
            this.entry = entry;
        }

        @Override
        public Seq<Row> run(SparkSession session) {
            org.apache.spark.sql.classic.SparkSession classic = (org.apache.spark.sql.classic.SparkSession) session;
            io.indexeddf.spark.exec.PythonWriter.save(session.sqlContext(), org.apache.spark.sql.SaveMode.Overwrite,
                scala.collection.immutable.Map$.MODULE$.from(CollectionConverters.asScala(options)),
                org.apache.spark.sql.classic.Dataset.ofRows(classic, query));
            if (entry != null) {
                session.sessionState().catalog().invalidateCachedTable(entry);
            }
            return CollectionConverters.asScala(List.<Row>of()).toList();
        }

        @Override
        Object[] arguments() {
            return new Object[] {options, query, entry};
        }
    }

    /** {@code SHOW PARTITIONS name [PARTITION (...)]}: the partitions {@link #partitions} lists. */
    public static final class Partitions extends JavaCommand {
        private static final long serialVersionUID = 1L;
        private final List<Attribute> columns;
        private final List<String> partitions;

        public Partitions(List<Attribute> columns, List<String> partitions) {
            super(columns);
            this.columns = columns;
            this.partitions = partitions;
        }

        @Override
        public Seq<Row> run(SparkSession session) {
            List<Row> rows = new ArrayList<>();
            for (String p : partitions) {
                rows.add(RowFactory.create(p));
            }
            return CollectionConverters.asScala(rows).toList();
        }

        @Override
        Object[] arguments() {
            return new Object[] {columns, partitions};
        }
    }
}
