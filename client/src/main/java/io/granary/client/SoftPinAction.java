package io.granary.client;

/** What a put does to an object's soft pin (see DESIGN "Soft pin"). */
public enum SoftPinAction
{
    /** Leave the pin as the master's default has it; no TTL allowed. */
    PRESERVE,
    /** Soft-pin the object, optionally for a TTL (the master's default TTL when none is given). */
    ENABLE,
    /** Store as ordinary cache; no TTL allowed. */
    DISABLE
}
