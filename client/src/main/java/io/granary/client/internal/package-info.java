/**
 * Implementation of the client: the master stub, replica choice and the transfer orchestration of
 * puts and gets. Nothing here is API; engines use {@code io.granary.client} only.
 */
package io.granary.client.internal;
