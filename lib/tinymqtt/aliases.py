# Outbound MQTT 5 topic aliases for one connection: topics get aliases up to the server's Topic Alias
# Maximum, the least recently used one is reassigned when they run out. A hit allocates nothing.


class TopicAliases:
    def __init__(self, maximum):  # (a new connection gets new ones: every alias is forgotten, spec 3.3.2.3.4)
        self.max = maximum
        if maximum:  # (none granted: lookup() answers 0 and needs no tables)
            self.alias = {}  # encoded topic -> alias
            self.topic = [None] * (maximum + 1)
            self.used = [0] * (maximum + 1)  # alias -> the clock of its last use (0: free)
            self.clock = 0

    def lookup(self, topic):
        """The Topic Alias to send topic with, as packets.encode_publish takes it: > 0 a new mapping (the topic and
        the alias), < 0 one the server already has (the alias -alias alone); 0: none granted."""
        if not self.max:
            return 0
        self.clock += 1
        a = self.alias.get(topic, 0)
        if a:
            self.used[a] = self.clock
            return -a
        a = 1
        for i in range(2, self.max + 1):  # the least recently used alias: a free one (0) first, the lowest
            if self.used[i] < self.used[a]:
                a = i
        self.alias.pop(self.topic[a], None)  # (its old topic, if any, loses it)
        self.topic[a], self.used[a] = topic, self.clock
        self.alias[topic] = a
        return a
