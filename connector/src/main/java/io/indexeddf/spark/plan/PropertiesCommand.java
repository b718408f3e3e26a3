package io.indexeddf.spark.plan;

import io.indexeddf.log.DeltaLog;
import io.indexeddf.log.IndexedDFException;
import io.indexeddf.spark.exec.PythonWriter;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.TableIdentifier;
import org.apache.spark.sql.execution.command.AlterTableSetPropertiesCommand;
import org.apache.spark.sql.execution.command.AlterTableUnsetPropertiesCommand;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * {@code ALTER TABLE ... SET TBLPROPERTIES (...)} / {@code UNSET TBLPROPERTIES [IF EXISTS] (...)}
 * on an indexeddf table, as Spark runs it (eagerly, once): one metadata commit to the table's
 * log through the Python writer (the private write options {@code _setProperties}, the
 * properties as a JSON object, and {@code _unsetProperties}, {@code {"names": [...],
 * "ifExists": bool}}), which validates and commits them as {@code IndexedTable.set_properties}
 * / {@code unset_properties} do: an unknown {@code indexeddf.*} or {@code delta.*} name, a bad
 * value or (without {@code IF EXISTS}) a name that is not set is refused with a typed error
 * before anything is written; a property that needs a table feature upgrades the protocol in
 * the same commit. No data file is written, and the catalog entry keeps no copy of the
 * properties ({@code SHOW TBLPROPERTIES} reads the log: {@link ShowPropertiesCommand}). The
 * property {@code comment} (also what {@code COMMENT ON TABLE} sets) is the table's
 * description in the log, as in Delta, and the entry's comment (what {@code DESCRIBE} shows),
 * which Spark's own command then sets.
 */
public final class PropertiesCommand extends JavaCommand {
    private static final long serialVersionUID = 1L;

    private final String path;
    private final String storageOptions;
    /** The properties to set, or null for an unset. */
    private final Map<String, String> set;
    /** The names to unset, or null for a set. */
    private final List<String> unset;
    private final boolean ifExists;
    /** The catalog entry, or null for {@code indexeddf.`/path`}. */
    private final TableIdentifier table;

    public PropertiesCommand(String path, String storageOptions, Map<String, String> set, List<String> unset,
                             boolean ifExists, TableIdentifier table) {
        super(List.of());  // no result rows
        this.path = path;
        this.storageOptions = storageOptions;
        this.set = set;
        this.unset = unset;
        this.ifExists = ifExists;
        this.table = table;
    }

    /** {@code SET TBLPROPERTIES} of the table at {@code path} ({@code table}: its entry, or null). */
    static PropertiesCommand set(String path, String storageOptions, Map<String, String> properties,
                                 TableIdentifier table) {
        return new PropertiesCommand(path, storageOptions, new LinkedHashMap<>(properties), null, false, table);
    }

    /** {@code UNSET TBLPROPERTIES [IF EXISTS]} of the table at {@code path}. */
    static PropertiesCommand unset(String path, String storageOptions, Seq<String> names, boolean ifExists,
                                   TableIdentifier table) {
        return unset(path, storageOptions, CollectionConverters.asJava(names), ifExists, table);
    }

    static PropertiesCommand unset(String path, String storageOptions, List<String> names, boolean ifExists,
                                   TableIdentifier table) {
        return new PropertiesCommand(path, storageOptions, null, new ArrayList<>(names), ifExists, table);
    }

    @Override
    public Seq<Row> run(SparkSession session) {
        Map<String, String> options = new LinkedHashMap<>();
        options.put("path", path);
        if (storageOptions != null) {
            options.put("storageOptions", storageOptions);
        }
        try {
            if (set != null) {
                options.put("_setProperties", DeltaLog.JSON.writeValueAsString(set));
            } else {
                Map<String, Object> names = new LinkedHashMap<>();
                names.put("names", unset);
                names.put("ifExists", ifExists);
                options.put("_unsetProperties", DeltaLog.JSON.writeValueAsString(names));
            }
        } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
            throw new IndexedDFException("IndexedDFError", "cannot write the properties as JSON: " + e, e);
        }
        scala.collection.immutable.Map<String, String> params =
            scala.collection.immutable.Map$.MODULE$.from(CollectionConverters.asScala(options));
        // One row reaches the writer's commit through one task; it carries nothing.
        PythonWriter.save(session.sqlContext(), SaveMode.Append, params, session.range(1).toDF());
        if (table != null) {
            // The entry's comment follows the table's description (DESCRIBE shows the entry's).
            if (set != null && set.containsKey("comment")) {
                new AlterTableSetPropertiesCommand(table, scala.collection.immutable.Map$.MODULE$.from(
                    CollectionConverters.asScala(Map.of("comment", set.get("comment")))), false).run(session);
            } else if (unset != null && unset.contains("comment")) {
                new AlterTableUnsetPropertiesCommand(table,
                    CollectionConverters.asScala(List.of("comment")).toList(), true, false).run(session);
            }
            session.sessionState().catalog().invalidateCachedTable(table);
        }
        return CollectionConverters.asScala(List.<Row>of()).toList();
    }

    /** The constructor's arguments, in order (TreeNode.makeCopy calls the constructor with them). */
    @Override
    Object[] arguments() {
        return new Object[] {path, storageOptions, set, unset, ifExists, table};
    }
}
