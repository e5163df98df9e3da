package io.granary.node.transfer;

import io.granary.transfer.TransportKind;
import io.granary.transfer.natives.NativeTransfer;
import org.junit.jupiter.api.BeforeAll;

import static org.assertj.core.api.Assertions.assertThat;

/** Every test of {@link TransferServerWritevTest} against the native (C) transfer server. */
class NativeTransferServerWritevTest extends TransferServerWritevTest
{
    @BeforeAll
    static void requireTheLibrary()
    {
        assertThat(NativeTransfer.unavailabilityCause()).as("native transfer library").isNull();
    }

    @Override
    TransportKind serverTransport()
    {
        return TransportKind.NATIVE;
    }
}
