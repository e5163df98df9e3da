package io.granary.transfer.natives;

/**
 * The in-process fake of libibverbs that the JNI test library (libgranary_transfer_fake_verbs.so, built by
 * {@code make testlib}, never packaged) installs when it loads. Only callable in a JVM that loaded that library.
 */
final class FakeVerbs
{
    private FakeVerbs()
    {
    }

    /** Verbs objects alive in the fake: contexts, protection domains, registrations, completion queues, QPs. */
    static native int live();

    /** Memory registrations (reg_mr calls that succeeded) made so far, ever. */
    static native int registrations();
}
