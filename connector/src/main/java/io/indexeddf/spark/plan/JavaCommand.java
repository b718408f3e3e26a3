package io.indexeddf.spark.plan;

import java.util.List;

import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.AttributeSet;
import org.apache.spark.sql.catalyst.plans.logical.Command;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Statistics;
import org.apache.spark.sql.execution.command.LeafRunnableCommand;
import org.apache.spark.sql.execution.command.RunnableCommand;
import scala.Enumeration;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * A command Spark runs eagerly ({@link LeafRunnableCommand}), written in Java against Scala
 * traits: the constructor runs the traits' initialisers, and the methods both
 * {@code LogicalPlan} and a trait define say which one holds, as Scala's linearisation would.
 * Subclasses give {@code run}, and their constructor's arguments ({@link #arguments}), which
 * the {@code Product} methods here return as {@code TreeNode.makeCopy} expects.
 */
abstract class JavaCommand extends LogicalPlan implements LeafRunnableCommand {
    private static final long serialVersionUID = 1L;

    private final Seq<Attribute> output;
    private Seq<Enumeration.Value> nodePatterns;

    /** A command whose result rows have {@code output}'s columns. */
    JavaCommand(List<Attribute> output) {
        this.output = CollectionConverters.asScala(output).toList();
        Command.$init$(this);
        RunnableCommand.$init$(this);
    }

    @Override
    public Seq<Attribute> output() {
        return output;
    }

    @Override
    public AttributeSet producedAttributes() {
        return LeafRunnableCommand.super.producedAttributes();
    }

    @Override
    public Statistics stats() {
        return LeafRunnableCommand.super.stats();
    }

    @Override
    public Seq<LogicalPlan> children() {
        return CollectionConverters.asScala(List.<LogicalPlan>of()).toList();
    }

    @Override
    public LogicalPlan withNewChildrenInternal(scala.collection.immutable.IndexedSeq<LogicalPlan> children) {
        return this;
    }

    @Override
    public Seq<Enumeration.Value> nodePatterns() {
        return nodePatterns;
    }

    @Override
    public void org$apache$spark$sql$catalyst$plans$logical$Command$_setter_$nodePatterns_$eq(
            Seq<Enumeration.Value> patterns) {
        this.nodePatterns = patterns;
    }

    /** The constructor's arguments, in order. */
    abstract Object[] arguments();

    @Override
    public final int productArity() {
        return arguments().length;
    }

    @Override
    public final Object productElement(int n) {
        Object[] args = arguments();
        if (n < 0 || n >= args.length) {
            throw new IndexOutOfBoundsException(String.valueOf(n));
        }
        return args[n];
    }

    @Override
    public final boolean canEqual(Object other) {
        return other != null && other.getClass() == getClass();
    }
}
