package io.indexeddf.spark.exec;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.indexeddf.log.AddFile;
import io.indexeddf.log.DeltaLog;
import io.indexeddf.log.IndexLog;
import io.indexeddf.log.Snapshot;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.types.StructType;
import scala.jdk.javaapi.CollectionConverters;

/**
 * What the connector's planner ({@link LookupPlanner}) chooses for a filter at a version, as
 * JSON: the test that holds it equal to the Python planner's choice
 * ({@code tests/test_planner_parity.py}) and anyone asking why a query did or did not use an
 * index. It plans the filter as {@code DriverLookup} sees it, after Spark's optimizer, but
 * reads nothing: the driver's limits and the cost check that may still hand a lookup to
 * Spark's scan are not applied. The files to scan are those the lookup reads: without the
 * unindexed files of partitions the filter excludes ({@link Partitions#prune}).
 */
public final class PlanReport {
    private PlanReport() {
    }

    /**
     * The plan of {@code filtered}, a filter over {@code spark.read.format("indexeddf")...load(path)},
     * as a JSON object: {@code reached} (false when Spark's optimizer answered
     * the filter without reading the table), {@code fixed} (column -> how many values the filter
     * fixes), {@code index} (the index that answers, or null: Spark's scan), {@code keys},
     * {@code indexBuckets} (index buckets probed), {@code indexFiles} (index files read),
     * {@code liveCovered} (live file ids the index answers for) and {@code scan} (the live files
     * the lookup scans, by log path). Its session must not run the connector's driver lookup
     * (the optimized plan would no longer hold the filter): set
     * {@code spark.indexeddf.driverLookup.enabled} and {@code spark.indexeddf.lookupTasks.enabled}
     * to false on it.
     */
    public static String filter(Dataset<?> filtered) {
        LogicalPlan optimized = filtered.queryExecution().optimizedPlan();
        ObjectNode out = DeltaLog.JSON.createObjectNode();
        Filter filter = tableFilter(optimized);
        out.put("reached", filter != null);
        if (filter == null) {
            return out.toString();
        }
        LogicalRelation lr = (LogicalRelation) filter.child();
        HadoopFsRelation rel = (HadoopFsRelation) lr.relation();
        Snapshot snapshot = ((SnapshotFileIndex) rel.location()).snapshot();
        StructType schema = Partitions.readable(rel.dataSchema(), snapshot);
        List<Attribute> output = new ArrayList<>(CollectionConverters.asJava(lr.output()));
        Map<String, List<Object>> fixed = LookupPlanner.fixedValues(filter.condition(), output);
        ObjectNode counts = out.putObject("fixed");
        fixed.forEach((c, values) -> counts.put(c, values.size()));
        LookupLimits limits = new LookupLimits(filtered.sparkSession());
        LookupPlanner.Plan plan = LookupPlanner.plan(snapshot, schema, fixed, limits);
        if (plan == null) {
            out.putNull("index");
            return out.toString();
        }
        Partitions.prune(plan.scan, filter.condition(), snapshot, schema);  // as DriverLookup reads it
        out.put("index", plan.index.name);
        out.put("keys", plan.keys.size());
        Map<Integer, int[]> hashes = plan.index.coveredIds().isEmpty() ? Map.of()
            : LookupReader.hashesByBucket(plan, schema);
        ArrayNode buckets = out.putArray("indexBuckets");
        hashes.keySet().forEach(buckets::add);
        ArrayNode files = out.putArray("indexFiles");
        for (IndexLog.IndexFile f : LookupReader.touchedFiles(plan, hashes)) {
            files.add(f.path);
        }
        ArrayNode covered = out.putArray("liveCovered");
        new TreeSet<>(plan.liveCovered).forEach(covered::add);
        TreeSet<String> scan = new TreeSet<>();
        for (AddFile a : plan.scan) {
            scan.add(a.path);
        }
        ArrayNode scanned = out.putArray("scan");
        scan.forEach(scanned::add);
        return out.toString();
    }

    /** The filter directly over an indexeddf table in {@code plan}, or null. */
    private static Filter tableFilter(LogicalPlan plan) {
        if (plan instanceof Filter && ((Filter) plan).child() instanceof LogicalRelation
                && ((LogicalRelation) ((Filter) plan).child()).relation() instanceof HadoopFsRelation
                && ((HadoopFsRelation) ((LogicalRelation) ((Filter) plan).child()).relation()).location()
                    instanceof SnapshotFileIndex) {
            return (Filter) plan;
        }
        for (LogicalPlan child : CollectionConverters.asJava(plan.children())) {
            Filter f = tableFilter(child);
            if (f != null) {
                return f;
            }
        }
        return null;
    }
}
