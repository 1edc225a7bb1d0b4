package dev.slipstream.it;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.slipstream.bench.ConfigurationDoc;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

class ConfigurationDocTest {
  @Test
  void committedConfigurationReferenceIsCurrent() throws Exception {
    Path doc = Path.of(System.getProperty("slipstream.docs.dir", "../docs"), "configuration.md");
    assertEquals(ConfigurationDoc.render(), Files.readString(doc),
        doc + " is stale: regenerate it with dev.slipstream.bench.ConfigurationDoc (command in the file's header)");
  }
}
