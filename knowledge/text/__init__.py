"""Words of English and Chinese: Snowball stems and jieba words for the lexical index and the gate,
how common an English word is, and near-copies of one passage."""
