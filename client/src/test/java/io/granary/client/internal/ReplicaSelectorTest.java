package io.granary.client.internal;

import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

import static org.assertj.core.api.Assertions.assertThat;

class ReplicaSelectorTest
{
    private final Map<String, Integer> load = new HashMap<>();

    private static ReplicaExtent replica(final String endpoint)
    {
        return new ReplicaExtent("n-" + endpoint, endpoint, 1, 0, 10, null, 0, 10);
    }

    private ReplicaSelector selector(final Set<String> localEndpoints)
    {
        return new ReplicaSelector(localEndpoints::contains, e -> load.getOrDefault(e, 0));
    }

    /** The order in which a read would try the replicas if every attempt failed. */
    private static List<String> failoverOrder(final ReplicaSelector selector, final List<ReplicaExtent> replicas)
    {
        final List<ReplicaExtent> untried = new ArrayList<>(replicas);
        final List<String> order = new ArrayList<>();
        while (!untried.isEmpty())
        {
            order.add(untried.remove(selector.pick(untried)).endpoint());
        }
        return order;
    }

    @Test
    void shouldPickTheSameHostReplicaFirstEvenWhenBusier()
    {
        load.put("local:1", 50);
        final List<ReplicaExtent> replicas = List.of(replica("a:1"), replica("local:1"), replica("b:1"));

        assertThat(selector(Set.of("local:1")).pick(replicas)).isEqualTo(1);
    }

    @Test
    void shouldPickTheLeastLoadedAmongRemoteReplicas()
    {
        load.put("a:1", 3);
        load.put("b:1", 1);
        load.put("c:1", 2);

        assertThat(selector(Set.of()).pick(List.of(replica("a:1"), replica("b:1"), replica("c:1")))).isEqualTo(1);
    }

    @Test
    void shouldKeepTheMastersOrderBetweenEquals()
    {
        assertThat(selector(Set.of()).pick(List.of(replica("a:1"), replica("b:1")))).isZero();
    }

    @Test
    void shouldFailOverLocalFirstThenByLoad()
    {
        load.put("a:1", 5);
        load.put("b:1", 0);
        load.put("local:2", 9);
        load.put("local:1", 7);
        final List<ReplicaExtent> replicas =
            List.of(replica("a:1"), replica("local:2"), replica("b:1"), replica("local:1"));

        assertThat(failoverOrder(selector(Set.of("local:1", "local:2")), replicas))
            .containsExactly("local:1", "local:2", "b:1", "a:1");
    }

    @Test
    void shouldAnswerMinusOneForNoCandidates()
    {
        assertThat(selector(Set.of()).pick(List.of())).isEqualTo(-1);
    }
}
