package io.indexeddf.spark;

import io.indexeddf.log.IndexedDFException;
import io.indexeddf.spark.plan.ConstraintCommand;
import io.indexeddf.spark.plan.DescribeDetailCommand;
import io.indexeddf.spark.plan.DescribeHistoryCommand;
import io.indexeddf.spark.plan.TableOperationCommand;
import java.util.ArrayList;
import java.util.List;

import org.apache.spark.sql.catalyst.FunctionIdentifier;
import org.apache.spark.sql.catalyst.TableIdentifier;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.parser.ParameterContext;
import org.apache.spark.sql.catalyst.parser.ParseException;
import org.apache.spark.sql.catalyst.parser.ParserInterface;
import org.apache.spark.sql.catalyst.parser.SqlStatementSplitResult;
import org.apache.spark.sql.catalyst.parser.TemporalIdentifier;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;
import scala.collection.immutable.Seq;

/**
 * The session's SQL parser with Delta's statements on indexeddf tables, as delta-spark's
 * {@code DeltaSqlParser} adds them: it parses its own statements and hands every other text
 * to Spark's parser (the delegate). Its statements, with the syntax of delta-spark's grammar
 * ({@code table} is {@code t}, {@code db.t}, {@code indexeddf.`/path`} or {@code '/path'}):
 * <ul>
 *   <li>{@code (DESC | DESCRIBE) HISTORY table [LIMIT n]}: {@link DescribeHistoryCommand};</li>
 *   <li>{@code (DESC | DESCRIBE) DETAIL table}: {@link DescribeDetailCommand};</li>
 *   <li>{@code OPTIMIZE table [WHERE predicate] [ZORDER BY (c, ...)]},
 *       {@code VACUUM table [RETAIN n HOURS] [DRY RUN]} and
 *       {@code RESTORE [TABLE] table [TO] (VERSION | SYSTEM_VERSION) AS OF n} /
 *       {@code ... (TIMESTAMP | SYSTEM_TIME) AS OF 'timestamp'}: {@link TableOperationCommand},
 *       which runs the Python API's operation;</li>
 *   <li>the index statements, in the syntax of Spark's {@code CREATE INDEX} and {@code DROP INDEX}:
 *       {@code CREATE INDEX [IF NOT EXISTS] name ON [TABLE] table [USING indexeddf] (c, ...)
 *       [OPTIONS (numBuckets = n)]}, {@code DROP INDEX [IF EXISTS] name ON [TABLE] table}, and
 *       {@code REFRESH INDEX name ON [TABLE] table [INCREMENTAL | FULL | QUICK]}
 *       ({@link TableOperationCommand}, the Python API's {@code create_index}, {@code drop_index},
 *       {@code refresh}).</li>
 *   <li>{@code SHOW INDEXES [IN | FROM] table}: {@link io.indexeddf.spark.plan.ShowIndexesCommand}, one row
 *       per index;</li>
 *   <li>{@code CONVERT TO INDEXEDDF table INDEX BY (c, ...) [BUCKETS n]} ({@code table}:
 *       {@code delta.`/path`}, {@code indexeddf.`/path`} or {@code '/path'}): the Python API's
 *       {@code IndexedTable.convert} ({@link TableOperationCommand}); Delta's {@code CONVERT TO
 *       DELTA parquet.`/path` [NO STATISTICS] [PARTITIONED BY (c type, ...)]}, which may add
 *       {@code INDEX BY (c, ...) [BUCKETS n]} to index the new table too.</li>
 * </ul>
 * Spark's own {@code ALTER TABLE ... ADD CONSTRAINT name CHECK (expr)} and {@code ALTER TABLE ...
 * DROP CONSTRAINT [IF EXISTS] name}, parsed by the delegate, become a {@link ConstraintCommand}
 * when they name an indexeddf table (Spark's analyzer would refuse them for a table of its
 * session catalog before any rule of the connector runs).
 * A text that starts like one of these but does not follow its syntax goes to Spark's parser,
 * which says where it fails. OPTIMIZE's predicate is parsed by the delegate's
 * {@code parseExpression}. The parser is hand-written (a tokenizer and a few rules): the
 * statements are short, and the connector has no grammar tool.
 */
public final class IndexedDFSqlParser implements ParserInterface {
    private final ParserInterface delegate;

    /** A parser that handles Delta's statements and gives every other text to {@code delegate}. */
    public IndexedDFSqlParser(ParserInterface delegate) {
        this.delegate = delegate;
    }

    @Override
    public LogicalPlan parsePlan(String sqlText) throws ParseException {
        LogicalPlan ours = parseOurs(sqlText);
        return ours != null ? ours : ConstraintCommand.ofStatement(delegate.parsePlan(sqlText));
    }

    @Override
    public LogicalPlan parsePlanWithParameters(String sqlText, ParameterContext context) throws ParseException {
        LogicalPlan ours = parseOurs(sqlText);
        return ours != null ? ours : ConstraintCommand.ofStatement(delegate.parsePlanWithParameters(sqlText, context));
    }

    @Override
    public Expression parseExpression(String sqlText) throws ParseException {
        return delegate.parseExpression(sqlText);
    }

    @Override
    public TableIdentifier parseTableIdentifier(String sqlText) throws ParseException {
        return delegate.parseTableIdentifier(sqlText);
    }

    @Override
    public FunctionIdentifier parseFunctionIdentifier(String sqlText) throws ParseException {
        return delegate.parseFunctionIdentifier(sqlText);
    }

    @Override
    public Seq<String> parseMultipartIdentifier(String sqlText) throws ParseException {
        return delegate.parseMultipartIdentifier(sqlText);
    }

    @Override
    public TemporalIdentifier parseTemporalTableIdentifier(String sqlText) throws ParseException {
        return delegate.parseTemporalTableIdentifier(sqlText);
    }

    @Override
    public LogicalPlan parseQuery(String sqlText) throws ParseException {
        return delegate.parseQuery(sqlText);
    }

    @Override
    public StructType parseRoutineParam(String sqlText) throws ParseException {
        return delegate.parseRoutineParam(sqlText);
    }

    @Override
    public SqlStatementSplitResult splitStatements(String sqlText) {
        return delegate.splitStatements(sqlText);
    }

    @Override
    public StructType parseTableSchema(String sqlText) throws ParseException {
        return delegate.parseTableSchema(sqlText);
    }

    @Override
    public DataType parseDataType(String sqlText) throws ParseException {
        return delegate.parseDataType(sqlText);
    }

    /** The plan of one of this parser's statements, or null when {@code sql} is not one. */
    LogicalPlan parseOurs(String sql) throws ParseException {
        List<Token> tokens;
        try {
            tokens = Token.split(sql);
        } catch (IllegalStateException e) {
            return null;  // an unclosed quote or comment: Spark's parser says where
        }
        Cursor c = new Cursor(sql, tokens);
        if (c.atEnd()) {
            return null;
        }
        try {
            if (c.word("DESC") || c.word("DESCRIBE")) {
                if (c.word("HISTORY")) {
                    return describeHistory(c);
                }
                if (c.word("DETAIL")) {
                    TableName t = tableName(c);
                    return t != null && c.end() ? new DescribeDetailCommand(t.path, t.name) : null;
                }
                return null;
            }
            if (c.word("OPTIMIZE")) {
                return optimize(c);
            }
            if (c.word("VACUUM")) {
                return vacuum(c);
            }
            if (c.word("RESTORE")) {
                return restore(c);
            }
            if (c.word("CREATE")) {
                return c.word("INDEX") ? createIndex(c) : null;
            }
            if (c.word("DROP")) {
                return c.word("INDEX") ? dropIndex(c) : null;
            }
            if (c.word("REFRESH")) {
                return c.word("INDEX") ? refreshIndex(c) : null;
            }
            if (c.word("SHOW")) {
                if (!c.word("INDEXES") && !c.word("INDEX")) {
                    return null;
                }
                if (!c.word("IN")) {
                    c.word("FROM");
                }
                TableName t = tableName(c);
                return t != null && c.end() ? new io.indexeddf.spark.plan.ShowIndexesCommand(t.path, t.name) : null;
            }
            if (c.word("CONVERT")) {
                return c.word("TO") ? convert(c) : null;
            }
        } catch (NumberFormatException e) {
            return null;
        }
        return null;
    }

    private static LogicalPlan describeHistory(Cursor c) {
        TableName t = tableName(c);
        if (t == null) {
            return null;
        }
        Integer limit = null;
        if (c.word("LIMIT")) {
            Token n = c.next();
            if (n == null || n.kind != Token.NUMBER) {
                return null;
            }
            limit = Integer.valueOf(n.text);
        }
        return c.end() ? new DescribeHistoryCommand(t.path, t.name, limit) : null;
    }

    private LogicalPlan optimize(Cursor c) throws ParseException {
        TableName t = tableName(c);
        if (t == null) {
            return null;
        }
        String where = null;
        if (c.word("WHERE")) {
            int start = c.position();
            int end = c.find("ZORDER");
            if (end == start) {
                return null;
            }
            where = c.text(start, end);
            delegate.parseExpression(where);  // a syntax error in the predicate is Spark's to report
            c.seek(end);
        }
        List<String> zorder = null;
        if (c.word("ZORDER")) {
            if (!c.word("BY")) {
                return null;
            }
            boolean paren = c.symbol("(");
            zorder = columnNames(c);
            if (zorder == null || (paren && !c.symbol(")"))) {
                return null;
            }
        }
        return c.end() ? TableOperationCommand.optimize(t.path, t.name, where, zorder) : null;
    }

    private static LogicalPlan vacuum(Cursor c) {
        TableName t = tableName(c);
        if (t == null) {
            return null;
        }
        Double hours = null;
        if (c.word("RETAIN")) {
            boolean minus = c.symbol("-");
            Token n = c.next();
            if (n == null || n.kind != Token.NUMBER || !c.word("HOURS")) {
                return null;
            }
            hours = Double.valueOf(n.text.replaceAll("(?i)(BD|[LSYD])$", ""));
            if (minus) {
                hours = -hours;
            }
        }
        boolean dryRun = false;
        if (c.word("DRY")) {
            if (!c.word("RUN")) {
                return null;
            }
            dryRun = true;
        }
        return c.end() ? TableOperationCommand.vacuum(t.path, t.name, hours, dryRun) : null;
    }

    private static LogicalPlan restore(Cursor c) {
        c.word("TABLE");
        TableName t = tableName(c);
        if (t == null) {
            return null;
        }
        c.word("TO");
        c.word("FOR");
        boolean byVersion;
        if (c.word("VERSION") || c.word("SYSTEM_VERSION")) {
            byVersion = true;
        } else if (c.word("TIMESTAMP") || c.word("SYSTEM_TIME")) {
            byVersion = false;
        } else {
            return null;
        }
        if (!c.word("AS") || !c.word("OF")) {
            return null;
        }
        Token v = c.next();
        if (v == null || !c.end()) {
            return null;
        }
        if (byVersion) {
            if (v.kind != Token.NUMBER && v.kind != Token.STRING) {
                return null;
            }
            long version;
            try {
                version = Long.parseLong(v.text.trim());
            } catch (NumberFormatException e) {
                throw IndexedDFException.option("RESTORE ... VERSION AS OF " + v.text
                    + ": the version must be a whole number (DESCRIBE HISTORY lists them)");
            }
            return TableOperationCommand.restore(t.path, t.name, version, null);
        }
        if (v.kind != Token.STRING) {
            return null;
        }
        return TableOperationCommand.restore(t.path, t.name, null, v.text);
    }

    /** {@code CREATE INDEX [IF NOT EXISTS] name ON [TABLE] table [USING indexeddf] (c, ...) [OPTIONS (numBuckets [=] n)]}. */
    private static LogicalPlan createIndex(Cursor c) {
        boolean ifNotExists = false;
        if (c.word("IF")) {
            if (!c.word("NOT") || !c.word("EXISTS")) {
                return null;
            }
            ifNotExists = true;
        }
        String index = identifier(c);
        if (index == null || !c.word("ON")) {
            return null;
        }
        c.word("TABLE");
        TableName t = tableName(c);
        if (t == null) {
            return null;
        }
        if (c.word("USING")) {
            String type = identifier(c);
            if (type == null) {
                return null;
            }
            if (!type.equalsIgnoreCase(io.indexeddf.spark.exec.TableRelation.NAME)) {
                throw IndexedDFException.option("CREATE INDEX ... USING " + type + ": an indexeddf table has "
                    + "indexeddf's indexes only; leave USING out");
            }
        }
        List<String> columns = columnList(c);
        if (columns == null) {
            return null;
        }
        Integer numBuckets = null;
        if (c.word("OPTIONS")) {
            if (!c.symbol("(")) {
                return null;
            }
            do {
                Token key = c.next();
                if (key == null || key.kind == Token.SYMBOL || key.kind == Token.NUMBER) {
                    return null;
                }
                c.symbol("=");
                Token value = c.next();
                if (value == null || (value.kind != Token.NUMBER && value.kind != Token.STRING)) {
                    return null;
                }
                if (!key.text.equalsIgnoreCase("numBuckets")) {
                    throw IndexedDFException.option("CREATE INDEX ... OPTIONS (" + key.text + "): the only option "
                        + "is numBuckets (the index's bucket count; the table's by default)");
                }
                try {
                    numBuckets = Integer.valueOf(value.text.trim());
                } catch (NumberFormatException e) {
                    throw IndexedDFException.option("CREATE INDEX ... OPTIONS (numBuckets " + value.text
                        + "): give a whole number of buckets");
                }
            } while (c.symbol(","));
            if (!c.symbol(")")) {
                return null;
            }
        }
        return c.end() ? TableOperationCommand.createIndex(t.path, t.name, index, columns, numBuckets, ifNotExists)
            : null;
    }

    /** {@code DROP INDEX [IF EXISTS] name ON [TABLE] table}. */
    private static LogicalPlan dropIndex(Cursor c) {
        boolean ifExists = false;
        if (c.word("IF")) {
            if (!c.word("EXISTS")) {
                return null;
            }
            ifExists = true;
        }
        String index = identifier(c);
        if (index == null || !c.word("ON")) {
            return null;
        }
        c.word("TABLE");
        TableName t = tableName(c);
        return t != null && c.end() ? TableOperationCommand.dropIndex(t.path, t.name, index, ifExists) : null;
    }

    /** {@code REFRESH INDEX name ON [TABLE] table [INCREMENTAL | FULL | QUICK]}. */
    private static LogicalPlan refreshIndex(Cursor c) {
        String index = identifier(c);
        if (index == null || !c.word("ON")) {
            return null;
        }
        c.word("TABLE");
        TableName t = tableName(c);
        if (t == null) {
            return null;
        }
        String mode = null;
        for (String m : new String[] {"INCREMENTAL", "FULL", "QUICK"}) {
            if (mode == null && c.word(m)) {
                mode = m.toLowerCase(java.util.Locale.ROOT);
            }
        }
        return c.end() ? TableOperationCommand.refreshIndex(t.path, t.name, index, mode) : null;
    }

    /**
     * {@code CONVERT TO INDEXEDDF table INDEX BY (c, ...) [BUCKETS n]}; {@code CONVERT TO DELTA
     * parquet.`/path` ...} is refused with {@code InvalidOptionError} (indexeddf indexes Delta
     * tables; a Delta engine makes one of Parquet files first).
     */
    private static LogicalPlan convert(Cursor c) {
        if (c.word("DELTA")) {
            return convertParquet(c);
        }
        if (!c.word("INDEXEDDF")) {
            return null;
        }
        TableName t = tableName(c);
        IndexBy index = t != null && c.word("INDEX") ? indexBy(c) : null;
        return index != null && c.end() ? TableOperationCommand.convert(t.path, t.name, index.columns, index.buckets)
            : null;
    }

    /**
     * {@code CONVERT TO DELTA parquet.`/path` [NO STATISTICS] [PARTITIONED BY (c type, ...)] [INDEX BY
     * (c, ...) [BUCKETS n]]}: Delta's statement (the Parquet files become a Delta table in place),
     * and with {@code INDEX BY} indexeddf's {@code CONVERT TO INDEXEDDF} of it in the same statement.
     */
    private static LogicalPlan convertParquet(Cursor c) {
        TableName t = tableName(c);
        if (t == null) {
            return null;
        }
        boolean stats = true;
        if (c.word("NO")) {
            if (!c.word("STATISTICS")) {
                return null;
            }
            stats = false;
        }
        List<List<String>> partitions = new ArrayList<>();
        if (c.word("PARTITIONED")) {
            if (!c.word("BY") || !c.symbol("(")) {
                return null;
            }
            do {
                String column = identifier(c);
                String type = identifier(c);
                if (column == null || type == null) {
                    return null;
                }
                if (c.symbol("(")) {  // decimal(p, s)
                    StringBuilder args = new StringBuilder();
                    do {
                        Token n = c.next();
                        if (n == null || n.kind != Token.NUMBER) {
                            return null;
                        }
                        args.append(args.length() == 0 ? "" : ",").append(n.text);
                    } while (c.symbol(","));
                    if (!c.symbol(")")) {
                        return null;
                    }
                    type = type + "(" + args + ")";
                }
                partitions.add(List.of(column, type));
            } while (c.symbol(","));
            if (!c.symbol(")")) {
                return null;
            }
        }
        IndexBy index = new IndexBy(null, null);
        if (c.word("INDEX")) {
            index = indexBy(c);
            if (index == null) {
                return null;
            }
        }
        return c.end()
            ? TableOperationCommand.convertParquet(t.path, t.name, partitions, stats, index.columns, index.buckets)
            : null;
    }

    /** One identifier (a word or a quoted name), or null. */
    private static String identifier(Cursor c) {
        Token t = c.peek();
        if (t == null || (t.kind != Token.WORD && t.kind != Token.QUOTED)) {
            return null;
        }
        c.next();
        return t.text;
    }

    /** A table as Delta's statements name one: {@code '/path'} or a qualified name. */
    private static TableName tableName(Cursor c) {
        Token first = c.peek();
        if (first == null) {
            return null;
        }
        if (first.kind == Token.STRING) {
            c.next();
            return new TableName(first.text, null);
        }
        List<String> name = qualifiedName(c);
        return name == null ? null : new TableName(null, name);
    }

    /** Column names separated by commas (a nested field's parts joined by dots), or null. */
    private static List<String> columnNames(Cursor c) {
        List<String> columns = new ArrayList<>();
        do {
            List<String> col = qualifiedName(c);
            if (col == null) {
                return null;
            }
            columns.add(String.join(".", col));
        } while (c.symbol(","));
        return columns;
    }

    /** {@code (c, ...)}: {@link #columnNames} in parentheses, or null. */
    private static List<String> columnList(Cursor c) {
        if (!c.symbol("(")) {
            return null;
        }
        List<String> columns = columnNames(c);
        return columns != null && c.symbol(")") ? columns : null;
    }

    /** What {@code INDEX BY (c, ...) [BUCKETS n]} gives: the columns, and the bucket count (null: the default). */
    private static final class IndexBy {
        final List<String> columns;
        final Integer buckets;

        IndexBy(List<String> columns, Integer buckets) {
            this.columns = columns;
            this.buckets = buckets;
        }
    }

    /** {@code BY (c, ...) [BUCKETS n]} after {@code INDEX}, or null. */
    private static IndexBy indexBy(Cursor c) {
        List<String> columns = c.word("BY") ? columnList(c) : null;
        if (columns == null) {
            return null;
        }
        Integer buckets = null;
        if (c.word("BUCKETS")) {
            Token n = c.next();
            if (n == null || n.kind != Token.NUMBER) {
                return null;
            }
            buckets = Integer.valueOf(n.text);
        }
        return new IndexBy(columns, buckets);
    }

    private static List<String> qualifiedName(Cursor c) {
        List<String> parts = new ArrayList<>();
        do {
            Token part = c.next();
            if (part == null || (part.kind != Token.WORD && part.kind != Token.QUOTED)) {
                return null;
            }
            parts.add(part.text);
        } while (c.symbol("."));
        return parts;
    }

    /** A table named by path (a quoted string) or by the parts of its name. */
    private static final class TableName {
        final String path;
        final List<String> name;

        TableName(String path, List<String> name) {
            this.path = path;
            this.name = name;
        }
    }

    /** Where the rules are in the tokens of one text. */
    private static final class Cursor {
        private final String sql;
        private final List<Token> tokens;
        private int at;

        Cursor(String sql, List<Token> tokens) {
            this.sql = sql;
            this.tokens = tokens;
            int n = tokens.size();
            while (n > 0 && tokens.get(n - 1).kind == Token.SYMBOL && tokens.get(n - 1).text.equals(";")) {
                n--;  // trailing semicolons, as Delta's grammar allows
            }
            tokens.subList(n, tokens.size()).clear();
        }

        boolean atEnd() {
            return at >= tokens.size();
        }

        boolean end() {
            return atEnd();
        }

        Token peek() {
            return atEnd() ? null : tokens.get(at);
        }

        Token next() {
            return atEnd() ? null : tokens.get(at++);
        }

        /** Takes the keyword {@code keyword} (any case, not quoted) if it is next. */
        boolean word(String keyword) {
            Token t = peek();
            if (t != null && t.kind == Token.WORD && t.text.equalsIgnoreCase(keyword)) {
                at++;
                return true;
            }
            return false;
        }

        boolean symbol(String s) {
            Token t = peek();
            if (t != null && t.kind == Token.SYMBOL && t.text.equals(s)) {
                at++;
                return true;
            }
            return false;
        }

        int position() {
            return at;
        }

        void seek(int position) {
            at = position;
        }

        /** The index of the next keyword {@code keyword} at or after here, or the end. */
        int find(String keyword) {
            for (int i = at; i < tokens.size(); i++) {
                Token t = tokens.get(i);
                if (t.kind == Token.WORD && t.text.equalsIgnoreCase(keyword)) {
                    return i;
                }
            }
            return tokens.size();
        }

        /** The text of tokens {@code [from, to)} as written. */
        String text(int from, int to) {
            return sql.substring(tokens.get(from).start, tokens.get(to - 1).end);
        }
    }

    /** One token of a SQL text: a word, a quoted identifier, a string, a number or a symbol. */
    static final class Token {
        static final int WORD = 0;
        static final int QUOTED = 1;
        static final int STRING = 2;
        static final int NUMBER = 3;
        static final int SYMBOL = 4;

        final int kind;
        /** A word as written, a quoted identifier or string without its quotes, a symbol. */
        final String text;
        final int start;
        final int end;

        Token(int kind, String text, int start, int end) {
            this.kind = kind;
            this.text = text;
            this.start = start;
            this.end = end;
        }

        /** The tokens of {@code sql}, comments and white space left out. */
        static List<Token> split(String sql) {
            List<Token> out = new ArrayList<>();
            int i = 0;
            int n = sql.length();
            while (i < n) {
                char ch = sql.charAt(i);
                if (Character.isWhitespace(ch)) {
                    i++;
                } else if (sql.startsWith("--", i)) {
                    int nl = sql.indexOf('\n', i);
                    i = nl < 0 ? n : nl + 1;
                } else if (sql.startsWith("/*", i)) {
                    int close = sql.indexOf("*/", i + 2);
                    if (close < 0) {
                        throw new IllegalStateException("unclosed comment");
                    }
                    i = close + 2;
                } else if (ch == '\'' || ch == '"') {
                    StringBuilder text = new StringBuilder();
                    int j = i + 1;
                    while (true) {
                        if (j >= n) {
                            throw new IllegalStateException("unclosed string");
                        }
                        char d = sql.charAt(j);
                        if (d == '\\' && j + 1 < n) {
                            text.append(sql.charAt(j + 1));
                            j += 2;
                        } else if (d == ch) {
                            j++;
                            break;
                        } else {
                            text.append(d);
                            j++;
                        }
                    }
                    out.add(new Token(STRING, text.toString(), i, j));
                    i = j;
                } else if (ch == '`') {
                    StringBuilder text = new StringBuilder();
                    int j = i + 1;
                    while (true) {
                        if (j >= n) {
                            throw new IllegalStateException("unclosed identifier");
                        }
                        if (sql.charAt(j) == '`') {
                            if (j + 1 < n && sql.charAt(j + 1) == '`') {
                                text.append('`');
                                j += 2;
                                continue;
                            }
                            j++;
                            break;
                        }
                        text.append(sql.charAt(j++));
                    }
                    out.add(new Token(QUOTED, text.toString(), i, j));
                    i = j;
                } else if (Character.isDigit(ch) || (ch == '.' && i + 1 < n && Character.isDigit(sql.charAt(i + 1))
                        && (out.isEmpty() || out.get(out.size() - 1).end < i))) {
                    int j = i;
                    while (j < n && (Character.isLetterOrDigit(sql.charAt(j)) || sql.charAt(j) == '.'
                            || sql.charAt(j) == '_')) {
                        j++;
                    }
                    String text = sql.substring(i, j);
                    boolean number = text.matches("(?i)(\\d+\\.?\\d*|\\.\\d+)(E[+-]?\\d+)?(BD|[LSYD])?");
                    out.add(new Token(number ? NUMBER : WORD, text, i, j));
                    i = j;
                } else if (Character.isLetter(ch) || ch == '_') {
                    int j = i;
                    while (j < n && (Character.isLetterOrDigit(sql.charAt(j)) || sql.charAt(j) == '_')) {
                        j++;
                    }
                    out.add(new Token(WORD, sql.substring(i, j), i, j));
                    i = j;
                } else {
                    out.add(new Token(SYMBOL, String.valueOf(ch), i, i + 1));
                    i++;
                }
            }
            return out;
        }
    }

    @Override
    public String toString() {
        return "IndexedDFSqlParser(" + delegate + ")";
    }
}
