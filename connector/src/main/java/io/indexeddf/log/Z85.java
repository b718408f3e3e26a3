package io.indexeddf.log;

/**
 * ZeroMQ's Z85 (rfc.zeromq.org/spec/32), the base85 Delta writes inline deletion vectors and
 * the uuids of DV file names in: each 5 characters are a big-endian 32-bit word.
 */
final class Z85 {
    private static final String ALPHABET =
        "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";
    private static final byte[] DECODE = new byte[128];

    static {
        java.util.Arrays.fill(DECODE, (byte) -1);
        for (int i = 0; i < ALPHABET.length(); i++) {
            DECODE[ALPHABET.charAt(i)] = (byte) i;
        }
    }

    private Z85() {
    }

    /**
     * The bytes of {@code text} (a multiple of 5 characters), cut to {@code size} (the writer
     * pads the bytes to a multiple of 4). Throws {@link IllegalArgumentException} on text that
     * is not Z85.
     */
    static byte[] decode(String text, int size) {
        if (text.length() % 5 != 0) {
            throw new IllegalArgumentException("Z85 text must be a multiple of 5 characters, got " + text.length());
        }
        int words = text.length() / 5;
        if (size < 0 || size > words * 4) {
            throw new IllegalArgumentException("Z85 text holds " + words * 4 + " bytes, fewer than the " + size
                + " expected");
        }
        byte[] out = new byte[words * 4];
        for (int w = 0; w < words; w++) {
            long v = 0;
            for (int i = 0; i < 5; i++) {
                char c = text.charAt(w * 5 + i);
                int d = c < 128 ? DECODE[c] : -1;
                if (d < 0) {
                    throw new IllegalArgumentException("Z85 text holds a character outside the Z85 alphabet");
                }
                v = v * 85 + d;
            }
            if (v > 0xFFFFFFFFL) {
                throw new IllegalArgumentException("Z85 text holds a group worth more than 32 bits");
            }
            for (int i = 0; i < 4; i++) {
                out[w * 4 + i] = (byte) (v >>> (24 - 8 * i));
            }
        }
        return size == out.length ? out : java.util.Arrays.copyOf(out, size);
    }
}
