package dev.slipstream.it;

import java.util.ArrayList;
import java.util.List;
import org.apache.spark.SparkConf;
import org.apache.spark.deploy.master.Master$;
import org.apache.spark.deploy.worker.Worker$;
import org.apache.spark.rpc.RpcEnv;
import scala.Option;
import scala.Tuple3;

/**
 * A standalone Spark cluster started in this JVM whose workers sit on different loopback
 * addresses (127.0.0.2, 127.0.0.3, ...), so the scheduler sees distinct hosts. Local-cluster
 * mode puts every executor on one host, where Spark never launches a speculative copy.
 */
final class TwoHostCluster implements AutoCloseable {
  private final RpcEnv master;
  private final List<RpcEnv> workers = new ArrayList<>();
  private final String url;

  TwoHostCluster(int hosts, int memoryMb) {
    SparkConf conf = new SparkConf(false).set("spark.ui.enabled", "false").set("spark.master.ui.port", "0")
        .set("spark.worker.ui.port", "0");
    Tuple3<RpcEnv, Object, Option<Object>> m = Master$.MODULE$.startRpcEnvAndEndpoint("127.0.0.1", 0, 0, conf);
    master = m._1();
    url = "spark://127.0.0.1:" + master.address().port();
    String work = System.getenv("SPARK_HOME") + "/work";
    for (int i = 0; i < hosts; i++) {
      workers.add(Worker$.MODULE$.startRpcEnvAndEndpoint("127.0.0." + (2 + i), 0, 0, 1, memoryMb,
          new String[] {url}, work, Option.apply((Object) (i + 1)), conf, Option.empty()));
    }
  }

  String masterUrl() {
    return url;
  }

  @Override
  public void close() {
    workers.forEach(w -> {
      w.shutdown();
      w.awaitTermination();
    });
    master.shutdown();
    master.awaitTermination();
  }
}
