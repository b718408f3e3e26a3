package io.indexeddf.spark.plan;

import io.indexeddf.log.IndexedDFException;
import io.indexeddf.log.Spec;
import io.indexeddf.spark.exec.TableRelation;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.FunctionIdentifier;
import org.apache.spark.sql.catalyst.TableIdentifier;
import org.apache.spark.sql.catalyst.catalog.CatalogTable;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.ExpressionInfo;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.execution.datasources.LogicalRelation$;
import org.apache.spark.sql.sources.BaseRelation;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DateType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.TimestampNTZType;
import org.apache.spark.sql.types.TimestampType;
import scala.Function1;
import scala.Tuple3;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractFunction1;

/**
 * Delta's SQL table functions of the change data feed: {@code table_changes('t', start[, end])}
 * of a catalog table and {@code table_changes_by_path('/path', start[, end])} of a path, each
 * bound a version (an integer) or a timestamp (a string, or a timestamp or date expression), as
 * Delta takes them. Each is the connector's read of the feed
 * ({@code io.indexeddf.spark.exec.ChangeFeedRelation}) over that range; the session extension
 * registers both ({@code injectTableFunction}).
 *
 * <p>{@link ResolveReads} resolves a read of a catalog table (or of {@code indexeddf.`/path`})
 * with {@code readChangeFeed} in its options ({@code spark.read.options(...).table(name)},
 * SQL's {@code FROM name WITH ('readChangeFeed' = 'true', ...)}) to the same relation, before
 * Spark resolves the name to the table's own columns.
 */
public final class TableChanges {
    /** Delta's name of the function over a catalog table. */
    public static final String BY_NAME = "table_changes";
    /** Delta's name of the function over a path. */
    public static final String BY_PATH = "table_changes_by_path";

    private TableChanges() {
    }

    /** The function as {@code SparkSessionExtensions.injectTableFunction} takes it. */
    public static Tuple3<FunctionIdentifier, ExpressionInfo, Function1<Seq<Expression>, LogicalPlan>> function(
            boolean byPath) {
        String name = byPath ? BY_PATH : BY_NAME;
        ExpressionInfo info = new ExpressionInfo(TableChanges.class.getName(), null, name,
            "_FUNC_(" + (byPath ? "path" : "table") + ", start[, end]) - the change data feed of an indexeddf table "
            + "from version or timestamp start to end (inclusive; default: the newest version)",
            "");
        Function1<Seq<Expression>, LogicalPlan> builder = new AbstractFunction1<Seq<Expression>, LogicalPlan>() {
            @Override
            public LogicalPlan apply(Seq<Expression> args) {
                return plan(SparkSession.active(), byPath, CollectionConverters.asJava(args));
            }
        };
        return new Tuple3<>(FunctionIdentifier.apply(name), info, builder);
    }

    /** The feed's relation for the function's arguments. */
    static LogicalPlan plan(SparkSession session, boolean byPath, List<Expression> args) {
        String name = byPath ? BY_PATH : BY_NAME;
        if (args.size() < 2 || args.size() > 3) {
            throw IndexedDFException.option(name + " takes 2 or 3 arguments (" + (byPath ? "path" : "table")
                + ", start[, end]), got " + args.size());
        }
        Object target = value(args.get(0), name);
        if (!(target instanceof String)) {
            throw IndexedDFException.option(name + "'s first argument is the " + (byPath ? "table's path" : "table's "
                + "name") + " as a string");
        }
        Map<String, String> params = new LinkedHashMap<>();
        params.put("path", byPath ? (String) target : location(session, (String) target));
        params.put(Spec.CHANGE_FEED_OPTION, "true");
        bound(params, "starting", args.get(1), name);
        if (args.size() == 3) {
            bound(params, "ending", args.get(2), name);
        }
        BaseRelation relation = TableRelation.read(session.sqlContext(),
            scala.collection.immutable.Map$.MODULE$.from(CollectionConverters.asScala(params)), null);
        return LogicalRelation$.MODULE$.apply(relation, false);
    }

    /**
     * A read of a table by name whose options ask for the change data feed: the feed's relation,
     * resolved in the analyzer's "Hints" batch so that the query's {@code *} and column names
     * resolve against the feed's columns ({@code _change_type}, ...), not the table's. Streaming
     * reads are left to the streaming source; names that are no indexeddf table, to Spark.
     */
    public static final class ResolveReads extends org.apache.spark.sql.catalyst.rules.Rule<LogicalPlan> {
        private final SparkSession session;

        /** The rule of a session (the extension's builder). */
        public ResolveReads(SparkSession session) {
            this.session = session;
        }

        @Override
        public LogicalPlan apply(LogicalPlan plan) {
            return plan.resolveOperatorsDown(new scala.runtime.AbstractPartialFunction<LogicalPlan, LogicalPlan>() {
                @Override
                public boolean isDefinedAt(LogicalPlan p) {
                    return p instanceof org.apache.spark.sql.catalyst.analysis.UnresolvedRelation
                        && !((org.apache.spark.sql.catalyst.analysis.UnresolvedRelation) p).isStreaming()
                        && io.indexeddf.spark.exec.ChangeFeedRelation.requested(
                            ((org.apache.spark.sql.catalyst.analysis.UnresolvedRelation) p).options()
                                .asCaseSensitiveMap());
                }

                @Override
                public LogicalPlan apply(LogicalPlan p) {
                    org.apache.spark.sql.catalyst.analysis.UnresolvedRelation u =
                        (org.apache.spark.sql.catalyst.analysis.UnresolvedRelation) p;
                    List<String> parts = CollectionConverters.asJava(u.multipartIdentifier());
                    String path = null;
                    CatalogTable entry = null;
                    if (parts.size() == 2 && TableRelation.NAME.equalsIgnoreCase(parts.get(0))) {
                        path = parts.get(1);
                    } else if (parts.size() <= 2 || parts.size() == 3
                            && parts.get(0).equalsIgnoreCase(
                                org.apache.spark.sql.connector.catalog.CatalogManager.SESSION_CATALOG_NAME())) {
                        if (session.sessionState().catalog().isTempView(u.multipartIdentifier())) {
                            return p;
                        }
                        String table = parts.get(parts.size() - 1);
                        String db = parts.size() >= 2 ? parts.get(parts.size() - 2) : null;
                        entry = CatalogTables.entryOf(session, new TableIdentifier(table, scala.Option.apply(db)));
                        if (entry != null) {
                            path = CatalogTables.location(entry, "reading " + entry.identifier().unquotedString());
                        }
                    }
                    if (path == null) {
                        return p;
                    }
                    Map<String, String> params = new LinkedHashMap<>();
                    for (Map.Entry<String, String> e : u.options().asCaseSensitiveMap().entrySet()) {
                        if (!e.getKey().startsWith("__")) {
                            params.put(e.getKey(), e.getValue());
                        }
                    }
                    params.put("path", path);
                    BaseRelation relation = TableRelation.read(session.sqlContext(),
                        scala.collection.immutable.Map$.MODULE$.from(CollectionConverters.asScala(params)), null);
                    LogicalPlan read = entry == null ? LogicalRelation$.MODULE$.apply(relation, false)
                        : LogicalRelation$.MODULE$.apply(relation, entry);
                    return org.apache.spark.sql.catalyst.plans.logical.SubqueryAlias$.MODULE$.apply(
                        parts.get(parts.size() - 1), read);
                }
            });
        }
    }

    private static String location(SparkSession session, String table) {
        TableIdentifier ident;
        try {
            ident = session.sessionState().sqlParser().parseTableIdentifier(table);
        } catch (org.apache.spark.sql.catalyst.parser.ParseException e) {
            throw IndexedDFException.option(BY_NAME + "'s first argument '" + table + "' is not a table name: "
                + e.getMessage());
        }
        CatalogTable entry = CatalogTables.entryOf(session, ident);
        if (entry == null) {
            throw IndexedDFException.option(BY_NAME + "('" + table + "', ...) reads the change data feed of an "
                + "indexeddf table, and the catalog has no indexeddf table " + table + " (for a Delta table of another engine, use "
                + BY_PATH + " on its path after IndexedTable.convert)");
        }
        return CatalogTables.location(entry, BY_NAME + "('" + table + "', ...)");
    }

    /** A range bound as Delta takes it: an integer is a version, a string, timestamp or date a timestamp. */
    private static void bound(Map<String, String> params, String which, Expression e, String name) {
        Object v = value(e, name);
        DataType t = e.dataType();
        if (v == null) {
            throw IndexedDFException.option("[DELTA_CDC_READ_NULL_RANGE_BOUNDARY] CDC read start/end parameters "
                + "cannot be null. Please provide a valid version or timestamp.");
        }
        if (t instanceof IntegerType || t instanceof LongType || t instanceof ShortType || t instanceof ByteType) {
            params.put(which + "Version", v.toString());
        } else if (t instanceof StringType) {
            params.put(which + "Timestamp", v.toString());
        } else if (t instanceof TimestampType || t instanceof TimestampNTZType) {
            params.put(which + "Timestamp", Long.toString(Math.floorDiv((Long) v, 1000L)));
        } else if (t instanceof DateType) {
            params.put(which + "Timestamp", Long.toString(((Integer) v) * 86_400_000L));
        } else {
            throw IndexedDFException.option(name + "'s " + which + " bound must be a version (an integer) or a "
                + "timestamp (a string such as '2026-11-21 10:00:00', or a timestamp), got " + t.simpleString());
        }
    }

    private static Object value(Expression e, String name) {
        if (!e.foldable()) {
            throw IndexedDFException.option(name + "'s arguments must be constants, got " + e.sql());
        }
        Object v = e.eval(null);
        return v instanceof org.apache.spark.unsafe.types.UTF8String ? v.toString() : v;
    }
}
