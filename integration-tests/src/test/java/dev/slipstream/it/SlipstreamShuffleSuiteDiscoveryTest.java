package dev.slipstream.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * Does what the ScalaTest engine does when it discovers {@link SlipstreamShuffleSuiteIT}
 * (construct it, read its test names and tags). The engine reports a suite that throws there as
 * a "failed" node that failsafe neither runs nor counts, so without this test a broken subclass
 * would let ShuffleSuite pass by not running at all.
 */
class SlipstreamShuffleSuiteDiscoveryTest {
  @Test
  @SuppressWarnings("deprecation") // JavaConverters: the one converter API of both Scala 2.12 and 2.13
  void suiteConstructsAndTagsEveryExcludedTestIgnoredAndNoOther() {
    SlipstreamShuffleSuiteIT suite = new SlipstreamShuffleSuiteIT();
    Set<String> names = scala.collection.JavaConverters.setAsJavaSetConverter(suite.testNames()).asJava();
    assertTrue(names.size() >= 19, "ShuffleSuite has " + names.size() + " tests, expected at least 19: " + names);
    assertTrue(names.containsAll(SlipstreamShuffleSuiteIT.EXCLUDED.keySet()),
        "excluded tests missing from this line's ShuffleSuite: " + SlipstreamShuffleSuiteIT.EXCLUDED.keySet());
    var tags = suite.tags();
    for (String name : names) {
      boolean ignored = tags.contains(name) && tags.apply(name).contains("org.scalatest.Ignore");
      assertEquals(SlipstreamShuffleSuiteIT.EXCLUDED.containsKey(name), ignored, "Ignore tag of '" + name + "'");
    }
    SlipstreamShuffleSuiteIT.EXCLUDED.forEach((name, reason) ->
        assertFalse(reason.isBlank(), "exclusion of '" + name + "' without a reason"));
  }
}
