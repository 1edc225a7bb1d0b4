package dev.slipstream.bench.tpch;

import io.trino.tpch.TpchColumn;
import io.trino.tpch.TpchColumnType;
import io.trino.tpch.TpchEntity;
import io.trino.tpch.TpchTable;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;

/**
 * The only class that touches the TPC-H generator. It is loaded by {@link TpchGenerator} in a
 * class loader of its own (tpch 1.2 and guava 26 over the platform loader), because tpch 1.2
 * needs guava 21 or later while Spark 3.5 puts guava 14 on the class path. So its signatures
 * hold JDK types only.
 *
 * <p>Values: identifiers as {@code Long}, integers as {@code Integer}, dates as {@code Integer}
 * days since 1970-01-01, text as {@code String}, and the generator's money and quantity columns
 * (doubles made from whole cents) as {@code Long} cents, so they become exact DECIMAL(12,2).
 */
public final class TpchRowSource {
  private TpchRowSource() {}

  /** Columns of a table as {@code {name, type}} with type one of IDENTIFIER, INTEGER, DATE, DOUBLE, VARCHAR. */
  public static List<String[]> columns(String table) {
    List<String[]> out = new ArrayList<>();
    for (TpchColumn<?> c : TpchTable.getTable(table).getColumns()) {
      out.add(new String[] {c.getColumnName(), c.getType().getBase().name()});
    }
    return out;
  }

  /** Rows of one part ({@code part} in 1..{@code parts}) of a table at a scale factor. */
  public static Iterator<Object[]> rows(String table, double scaleFactor, int part, int parts) {
    return rowsOf(TpchTable.getTable(table), scaleFactor, part, parts);
  }

  private static <E extends TpchEntity> Iterator<Object[]> rowsOf(TpchTable<E> table, double sf, int part, int parts) {
    List<TpchColumn<E>> columns = table.getColumns();
    Iterator<E> it = table.createGenerator(sf, part, parts).iterator();
    return new Iterator<>() {
      @Override
      public boolean hasNext() {
        return it.hasNext();
      }

      @Override
      public Object[] next() {
        E e = it.next();
        Object[] row = new Object[columns.size()];
        for (int i = 0; i < row.length; i++) {
          TpchColumn<E> c = columns.get(i);
          TpchColumnType.Base base = c.getType().getBase();
          row[i] = switch (base) {
            case IDENTIFIER -> c.getIdentifier(e);
            case INTEGER -> c.getInteger(e);
            case DATE -> c.getDate(e);
            case DOUBLE -> Math.round(c.getDouble(e) * 100);
            case VARCHAR -> c.getString(e);
          };
        }
        return row;
      }
    };
  }
}
