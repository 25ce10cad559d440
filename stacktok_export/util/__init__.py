"""Small helpers every part of the floor and the suite shares: reading an untrusted file
(:mod:`.untrusted`) and running untrusted work under a time and memory budget (:mod:`.bounded`).

Out of scope: anything tokenizer-specific.
"""
