package io.indexeddf.spark.exec;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;

import org.apache.hadoop.conf.Configuration;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.BasePredicate;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.InterpretedPredicate;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.Limit$;
import org.apache.spark.sql.catalyst.plans.logical.LocalRelation;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.execution.datasources.FileStatusWithMetadata;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.execution.datasources.PartitionDirectory;
import org.apache.spark.sql.execution.datasources.PartitionedFile;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat;
import org.apache.spark.sql.types.IntegerType$;
import scala.Function1;
import scala.Option;
import scala.collection.Iterator;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The rows of an indexed join's small side, collected once (what a broadcast join collects
 * too): local rows as they are; a small Parquet scan ({@code [Project] [Filter]} over
 * unpartitioned Parquet files of at most the probe byte limit) read in this JVM with Spark's
 * own Parquet reader, with no Spark job; any other plan run as a Spark job.
 */
public final class ProbeRows {
    private ProbeRows() {
    }

    /** The rows of {@code plan}, or null past {@code maxRows} rows. */
    public static LocalRelation collect(SparkSession session, LogicalPlan plan, int maxRows, long maxBytes) {
        if (plan instanceof LocalRelation) {
            LocalRelation l = (LocalRelation) plan;
            return l.data().size() <= maxRows ? l : null;
        }
        List<InternalRow> rows;
        try {
            rows = smallParquetScan(session, plan, maxRows, maxBytes);
        } catch (IOException e) {
            rows = null;  // a Spark job reads it (and reports what is wrong, if anything is)
        }
        if (rows == null) {
            rows = run(session, plan, maxRows);
        }
        return rows.size() > maxRows ? null
            : new LocalRelation(plan.output(), CollectionConverters.asScala(rows).toList(), false, Option.empty());
    }

    /** The first {@code maxRows + 1} rows of {@code plan}, run as a Spark job. */
    private static List<InternalRow> run(SparkSession session, LogicalPlan plan, int maxRows) {
        org.apache.spark.sql.classic.SparkSession classic = (org.apache.spark.sql.classic.SparkSession) session;
        LogicalPlan limited = (LogicalPlan) (Object) Limit$.MODULE$.apply(
            Literal.create(maxRows + 1, IntegerType$.MODULE$), plan);
        InternalRow[] rows = (InternalRow[]) org.apache.spark.sql.classic.Dataset$.MODULE$.ofRows(classic, limited)
            .queryExecution().executedPlan().executeCollect();
        return java.util.Arrays.asList(rows);
    }

    /**
     * The rows of {@code plan} read here when it is a scan of unpartitioned Parquet files of at
     * most {@code maxBytes} (with a filter and a projection above it), else null.
     */
    private static List<InternalRow> smallParquetScan(SparkSession session, LogicalPlan plan, int maxRows,
                                                      long maxBytes) throws IOException {
        Project project = plan instanceof Project ? (Project) plan : null;
        LogicalPlan n = project != null ? project.child() : plan;
        Filter filter = n instanceof Filter ? (Filter) n : null;
        n = filter != null ? filter.child() : n;
        if (!(n instanceof LogicalRelation) || ((LogicalRelation) n).isStreaming()
                || !(((LogicalRelation) n).relation() instanceof HadoopFsRelation)) {
            return null;
        }
        HadoopFsRelation rel = (HadoopFsRelation) ((LogicalRelation) n).relation();
        List<Attribute> output = CollectionConverters.asJava(n.output());
        // Spark's Parquet format, or ours for deletion vectors: another subclass (delta-spark's)
        // may need columns of its own plan to read right, so a Spark job reads it.
        if (!(rel.fileFormat().getClass() == ParquetFileFormat.class || rel.fileFormat() instanceof DeletionVectorFormat)
                || !rel.partitionSchema().isEmpty()
                || output.size() != rel.dataSchema().size()
                || (filter != null && !filter.condition().deterministic())
                || (project != null && !project.deterministic())) {
            return null;
        }
        scala.collection.immutable.Seq<Expression> none = scala.collection.immutable.List$.MODULE$.empty();
        List<FileStatusWithMetadata> files = new ArrayList<>();
        long bytes = 0;
        for (PartitionDirectory dir : CollectionConverters.asJava(rel.location().listFiles(none, none))) {
            for (FileStatusWithMetadata f : CollectionConverters.asJava(dir.files())) {
                files.add(f);
                bytes += f.getLen();
            }
        }
        if (bytes > maxBytes) {
            return null;
        }
        Configuration conf = ((org.apache.spark.sql.classic.SparkSession) session).sessionState().newHadoopConf();
        // The relation's own format: an indexeddf version with deletion vectors drops deleted rows.
        Function1<PartitionedFile, Iterator<InternalRow>> reader = ParquetRows.reader(session,
            (ParquetFileFormat) rel.fileFormat(), rel.dataSchema(), rel.dataSchema(),
            scala.collection.immutable.List$.MODULE$.empty(), false, conf);
        BasePredicate keep = null;
        if (filter != null) {
            keep = new InterpretedPredicate(LookupReader.bound(filter.condition(), output));
            keep.initialize(0);
        }
        UnsafeProjection shape = null;
        if (project != null) {
            List<Expression> exprs = new ArrayList<>();
            for (NamedExpression e : CollectionConverters.asJava(project.projectList())) {
                exprs.add((Expression) (Object) e);  // a Scala trait: every NamedExpression is an Expression
            }
            shape = UnsafeProjection.create(CollectionConverters.asScala(exprs).toList(), n.output());
        }
        List<InternalRow> out = new ArrayList<>();
        for (FileStatusWithMetadata f : files) {
            Iterator<InternalRow> rows = reader.apply(ParquetRows.split(f.getPath(), 0, f.getLen(), f.getLen(),
                f.getModificationTime(), f.metadata()));
            while (rows.hasNext() && out.size() <= maxRows) {
                InternalRow r = rows.next();
                if (keep == null || keep.eval(r)) {
                    out.add(shape == null ? r.copy() : shape.apply(r).copy());
                }
            }
        }
        return out;
    }
}
