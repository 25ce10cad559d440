"""Conversations: the reference chat format, rendered to ids and a loss mask.

:mod:`.chat` holds the ChatML-style format over the reserved role tokens: the renderer
(``render_conversation``: ids and mask from pieces, content as untrusted text), the Jinja
template shipped with every v1 export, and the string that template renders.

Out of scope: templates of other models (the suite renders those; this is the reference for
ours), tokenizing (any tokenizer with ``encode`` and ``special_token_id`` will do).
"""
