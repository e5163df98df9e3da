package io.granary.master.meta;

/**
 * One kept instance for each of the few distinct Strings that very many objects hold: tenants and client ids. Every
 * request decoded from the wire brings its own copies, and an object keeping them would carry them along; a client's
 * id (a random UUID, 36 characters) is a 24-byte String and a 56-byte array, the tenant another 40-48 bytes, so a
 * master taking single puts kept 128 bytes per object beyond what it needs (MasterMemoryProbe: 460 against 332).
 *
 * <p>A direct-mapped table of the Strings seen last, read and written without a lock: an equal String found in its
 * slot is returned instead of the one given, any other takes the slot. Two threads racing for one slot at worst keep
 * one more copy of an equal String, never a different one (a String is immutable and safely published through its
 * final fields). Bounded: {@link #SLOTS} references, whatever the number of clients; with more distinct Strings in use
 * than slots, some objects keep their own copy, as without this table.
 */
final class StringCanon
{
    static final int SLOTS = 1024;

    private final String[] slots = new String[SLOTS];

    /** {@code s}, or an equal String this table handed out before. */
    String canonical(final String s)
    {
        final int h = s.hashCode();
        final int i = (h ^ (h >>> 16)) & (SLOTS - 1);
        final String kept = slots[i];
        if (kept == s)
        {
            return s;
        }
        if (kept != null && kept.hashCode() == h && kept.equals(s))
        {
            return kept;
        }
        slots[i] = s;
        return s;
    }
}
