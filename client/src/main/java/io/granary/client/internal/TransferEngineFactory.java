package io.granary.client.internal;

import io.granary.transfer.TransferConfig;
import io.granary.transfer.TransferEngine;
import io.granary.transfer.TransportKind;

/** Makes the client's transfer engine; production uses {@code TransferEngines::create}, tests a double. */
@FunctionalInterface
public interface TransferEngineFactory
{
    TransferEngine create(TransportKind kind, TransferConfig config);
}
