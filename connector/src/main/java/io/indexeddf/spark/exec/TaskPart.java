package io.indexeddf.spark.exec;

import org.apache.spark.Partition;

/**
 * A partition of the connector's RDDs ({@link LookupRDD}, {@link PackedRows}): its index,
 * and what a subclass carries to the task. Equal to a partition of the same class and index.
 */
class TaskPart implements Partition {
    private static final long serialVersionUID = 1L;
    private final int index;

    TaskPart(int index) {
        this.index = index;
    }

    @Override
    public int index() {
        return index;
    }

    @Override
    public int hashCode() {
        return index;
    }

    @Override
    public boolean equals(Object other) {
        return other != null && other.getClass() == getClass() && ((TaskPart) other).index == index;
    }
}
