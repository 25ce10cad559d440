"""Small helpers every part of the floor and the suite shares, none of them about tokenizers:
atomic writes (:mod:`.atomic`), the garbage collector paused in allocation-heavy loops
(:mod:`.gc`), one progress reporter (:mod:`.progress`), the one ``first_difference``
(:mod:`.diff`), reading an untrusted file (:mod:`.untrusted`) under the size limits
(:mod:`.limits`), and running untrusted work under a time and memory budget (:mod:`.bounded`).

Out of scope: anything tokenizer-specific.
"""
