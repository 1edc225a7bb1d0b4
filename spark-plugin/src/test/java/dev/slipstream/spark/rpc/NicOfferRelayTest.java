package dev.slipstream.spark.rpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.slipstream.core.transport.EndpointDescriptor;
import dev.slipstream.gpu.nic.NicOffer;
import dev.slipstream.gpu.nic.NicQpRecord;
import dev.slipstream.gpu.serve.RingOffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.spark.SparkConf;
import org.apache.spark.rpc.RpcAddress;
import org.apache.spark.rpc.RpcCallContext;
import org.apache.spark.rpc.RpcEndpointRef;
import org.apache.spark.rpc.RpcTimeout;
import org.junit.jupiter.api.Test;
import scala.concurrent.Future;
import scala.reflect.ClassTag;

/**
 * gpunetio link offers and resident rings' set-up messages through Spark RPC: the driver forwards
 * one to the executor it names only, and drops one for or from an executor it does not have; an
 * executor's endpoint hands it to its GPU side and drops a malformed one.
 */
class NicOfferRelayTest {
  /** An executor's endpoint reference that records what the driver sends it. */
  static final class Recorder extends RpcEndpointRef {
    private static final long serialVersionUID = 1L;
    final String name;
    final transient List<Object> sent = new ArrayList<>();

    Recorder(String name) {
      super(new SparkConf(false));
      this.name = name;
    }

    @Override
    public RpcAddress address() {
      return new RpcAddress("127.0.0.1", 1);
    }

    @Override
    public String name() {
      return name;
    }

    @Override
    public void send(Object message) {
      sent.add(message);
    }

    @Override
    public <T> Future<T> ask(Object message, RpcTimeout timeout, ClassTag<T> tag) {
      throw new UnsupportedOperationException("not asked in this test");
    }

    /** The resident rings' set-up messages among what was sent, as sent. */
    List<byte[]> rings() {
      List<byte[]> out = new ArrayList<>();
      for (Object m : sent) {
        try {
          if (RpcMessages.decode((byte[]) m) instanceof RpcMessages.RingOfferMessage) {
            out.add((byte[]) m);
          }
        } catch (Exception e) {
          throw new AssertionError(e);
        }
      }
      return out;
    }

    /** The offers among what was sent. */
    List<NicOffer> offers() {
      List<NicOffer> out = new ArrayList<>();
      for (Object m : sent) {
        try {
          if (RpcMessages.decode((byte[]) m) instanceof RpcMessages.NicOfferMessage o) {
            out.add(o.offer());
          }
        } catch (Exception e) {
          throw new AssertionError(e);
        }
      }
      return out;
    }
  }

  /** The reply of a registration, discarded. */
  static final class Context implements RpcCallContext {
    @Override
    public void reply(Object response) {}

    @Override
    public void sendFailure(Throwable e) {
      throw new AssertionError(e);
    }

    @Override
    public RpcAddress senderAddress() {
      return new RpcAddress("127.0.0.1", 2);
    }
  }

  static PeerInfo peer(String id) {
    return new PeerInfo(id, "host-" + id, new EndpointDescriptor("tcp", "host-" + id + ":7077", new byte[0]));
  }

  static byte[] offer(String from, String to) {
    NicQpRecord r = new NicQpRecord(NicQpRecord.AddressType.ROCE, 0x77, 0, new byte[16], 5, 1);
    return RpcMessages.encode(new RpcMessages.NicOfferMessage(new NicOffer(from, to, 5, 0, List.of(r))));
  }

  @Test
  void theDriverForwardsAnOfferToItsRecipientOnly() {
    DriverEndpoint driver = new DriverEndpoint(null, Duration.ofSeconds(1));
    Recorder one = new Recorder("1");
    Recorder two = new Recorder("2");
    driver.receiveAndReply(new Context()).apply(new Object[] {RpcMessages.encode(new RpcMessages.Register(peer("1"))), one});
    driver.receiveAndReply(new Context()).apply(new Object[] {RpcMessages.encode(new RpcMessages.Register(peer("2"))), two});
    driver.receive().apply(offer("1", "2"));
    assertEquals(1, two.offers().size());
    assertEquals("1", two.offers().get(0).from());
    assertTrue(one.offers().isEmpty(), "the sender gets nothing back from the driver");
    driver.receive().apply(offer("1", "3"));  // not registered: dropped
    driver.receive().apply(offer("9", "2"));  // sender not registered: dropped
    driver.executorRemoved("2", "lost");
    driver.receive().apply(offer("1", "2"));
    assertEquals(1, two.offers().size());
    driver.receive().apply(new byte[] {1, 2, 3});  // malformed: dropped, nothing thrown
  }

  @Test
  void ringOffersTravelAsLinkOffersDo() throws Exception {
    DriverEndpoint driver = new DriverEndpoint(null, Duration.ofSeconds(1));
    Recorder one = new Recorder("1");
    Recorder two = new Recorder("2");
    driver.receiveAndReply(new Context()).apply(new Object[] {RpcMessages.encode(new RpcMessages.Register(peer("1"))), one});
    driver.receiveAndReply(new Context()).apply(new Object[] {RpcMessages.encode(new RpcMessages.Register(peer("2"))), two});
    RingOffer sent = RingOffer.offer("1", "2", 1 << 19, 0x5eed, 64, 42L);
    byte[] bytes = RpcMessages.encode(new RpcMessages.RingOfferMessage(sent));
    driver.receive().apply(bytes);
    assertEquals(1, two.rings().size());
    assertTrue(one.rings().isEmpty());
    driver.receive().apply(RpcMessages.encode(new RpcMessages.RingOfferMessage(RingOffer.refuse("2", "9", "gone"))));
    assertTrue(one.rings().isEmpty() && two.rings().size() == 1, "a message for an executor not registered is dropped");
    List<RingOffer> got = new ArrayList<>();
    ExecutorEndpoint e = new ExecutorEndpoint(null, "2", p -> {}, (id, why) -> {}, Map::of, o -> {}, got::add);
    e.receive().apply(two.rings().get(0));
    assertEquals(List.of(sent), got);
    byte[] forged = bytes.clone();
    int slotsAt = forged.length - 4 - 8 - 4; // slots, then the clock and the (empty) reason's length
    forged[slotsAt] = 0;
    forged[slotsAt + 1] = 0;
    forged[slotsAt + 2] = 0;
    forged[slotsAt + 3] = 48; // 48 slots in either byte order is not a power of two
    e.receive().apply(forged);
    assertEquals(1, got.size(), "a forged ring offer reached the GPU side");
  }

  @Test
  void anExecutorHandsOffersToItsGpuSide() {
    List<NicOffer> got = new ArrayList<>();
    ExecutorEndpoint e = new ExecutorEndpoint(null, "2", p -> {}, (id, why) -> {}, Map::of, got::add, o -> {});
    e.receive().apply(offer("1", "2"));
    assertEquals(1, got.size());
    byte[] forged = offer("1", "2");
    forged[forged.length - 1] = 9;  // a reserved byte of the record
    e.receive().apply(forged);
    assertEquals(1, got.size(), "a forged record reached the GPU side");
  }
}
